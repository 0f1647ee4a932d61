// sameAdapter decides whether a PPO round needs one frozen pass or two (src/train/adapter-identity.ts).
import { cp, mkdir, mkdtemp, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { sameAdapter } from "../src/train/adapter-identity.js";

async function adapter(root: string, name: string, weights: Buffer, config = '{"r": 16}'): Promise<string> {
  const dir = join(root, name);
  await mkdir(dir);
  await writeFile(join(dir, "adapter_model.safetensors"), weights);
  await writeFile(join(dir, "adapter_config.json"), config);
  return dir;
}

describe("train - sameAdapter", () => {
  it("same folder, a link to it, or a byte-identical copy: the same adapter; other bytes or config: not", async () => {
    const root = await mkdtemp(join(tmpdir(), "rlloop-adapters-"));
    const bytes = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7) % 251));
    const a = await adapter(root, "a", bytes);
    await cp(a, join(root, "copy"), { recursive: true });
    await symlink(a, join(root, "link"));
    const flipped = Buffer.from(bytes);
    flipped[4000] = flipped[4000]! ^ 1;
    const other = await adapter(root, "other", flipped);
    const shorter = await adapter(root, "shorter", bytes.subarray(1));
    const config = await adapter(root, "config", bytes, '{"r": 8}');

    expect(await sameAdapter(a, a)).toBe(true);
    expect(await sameAdapter(a, join(root, "link"))).toBe(true);
    expect(await sameAdapter(a, join(root, "copy"))).toBe(true);
    expect(await sameAdapter(a, other)).toBe(false);
    expect(await sameAdapter(a, shorter)).toBe(false);
    expect(await sameAdapter(a, config)).toBe(false);
  });

  it("compares files larger than its read chunk to the last byte", async () => {
    const root = await mkdtemp(join(tmpdir(), "rlloop-adapters-"));
    const big = Buffer.alloc(2.5 * (1 << 20), 7);
    const a = await adapter(root, "a", big);
    const same = await adapter(root, "same", Buffer.from(big));
    const last = Buffer.from(big);
    last[last.length - 1] = 8;
    const differs = await adapter(root, "differs", last);
    expect(await sameAdapter(a, same)).toBe(true);
    expect(await sameAdapter(a, differs)).toBe(false);
  });
});
