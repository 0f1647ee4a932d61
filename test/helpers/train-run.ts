// Runs of the trainer and of the Python reference on the trainer fixture (scripts/reference/train_fixture.py),
// and the comparisons of the Done-means tolerances.
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { expect } from "vitest";
import { seededPermutation } from "../../src/train/batching.js";
import { CHAT_TEMPLATE, REFERENCE, ROOT, cacheKey, cachedDir, runPython } from "./train-fixtures.js";
import { readSafetensors } from "./safetensors.js";

export const PROMPT = "Target: {{ name }}\n{% if memory %}Memory: {{ memory[0] }} {{ memory[1] }}\n{% endif %}Write the behaviour code.";

export async function trainFixture(): Promise<string> {
  const scripts = ["train_fixture.py", "tiny_model.py", "make_tokenizer.py", "qwen_tokenizer_parts.py", "lora_golden.py", "test_images.py", "common.py"];
  return cachedDir("train-fixture", cacheKey([...scripts.map((s) => join(REFERENCE, s)), CHAT_TEMPLATE]), async (dir, final) => {
    await runPython("train_fixture.py", [CHAT_TEMPLATE, dir, final]);
    await writeFile(join(dir, "prompt.jinja"), PROMPT);
  });
}

export async function scratch(): Promise<string> {
  return mkdtemp(join(tmpdir(), "rlloop-train-run-"));
}

/** `rlloop train ...` on CPU in fp32; throws with stderr on failure. */
export async function rlloopTrain(args: string[]): Promise<void> {
  const cli = join(ROOT, "test", "helpers", "train-cli.ts");
  await execa(process.execPath, ["--import", "tsx", cli, "train", ...args, "--device", "cpu", "--dtype", "float32"], {
    cwd: ROOT,
    env: { RLLOOP_LOG_LEVEL: "warn" },
  });
}

/** The reference with rlloop's row order for one rank (seededPermutation per epoch), written to a file. */
export async function reference(mode: "sft" | "ppo", args: string[], rows: number, epochs: number, seed: number, dir: string) {
  const orders = Array.from({ length: epochs }, (_, e) => seededPermutation(rows, seed, e));
  const ordersFile = join(dir, `orders-${mode}-${Date.now()}.json`);
  await writeFile(ordersFile, JSON.stringify(orders));
  await runPython("seed_reference.py", [mode, ...args, "--orders", ordersFile, "--epochs", String(epochs)]);
}

/** Every LoRA tensor's update (after − before) of `actual` within `rtol` of `expected`'s, relative in L2 norm. */
export async function expectSameUpdates(before: string, actual: string, expected: string, rtol: number) {
  const [b, a, e] = await Promise.all([before, actual, expected].map((d) => readSafetensors(join(d, "adapter_model.safetensors"))));
  expect([...a!.keys()].sort()).toEqual([...e!.keys()].sort());
  let worst = 0;
  for (const [key, ref] of e!) {
    const start = b!.get(key)?.data ?? new Float32Array(ref.data.length);
    let diff = 0, norm = 0;
    for (let i = 0; i < ref.data.length; i++) {
      const du = a!.get(key)!.data[i]! - ref.data[i]!;
      const u = ref.data[i]! - start[i]!;
      diff += du * du;
      norm += u * u;
    }
    const rel = Math.sqrt(diff) / Math.max(Math.sqrt(norm), 1e-30);
    worst = Math.max(worst, rel);
    expect(rel, `${key}: update differs by ${rel} relative`).toBeLessThanOrEqual(rtol);
  }
  return worst;
}

/** Each shared numeric field within `atol` (the seed's 4-decimal rounding can move a value by up to 1e-4). */
export function expectFieldsClose(actual: Record<string, unknown>, expected: Record<string, unknown>, fields: string[], atol: number) {
  for (const f of fields) {
    expect(Math.abs((actual[f] as number) - (expected[f] as number)), `${f}: ${actual[f]} vs ${expected[f]}`).toBeLessThanOrEqual(atol + 1e-9);
  }
}
