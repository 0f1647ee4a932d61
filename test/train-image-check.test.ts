// The up-front frame check (src/train/image-check.ts) names why a frame cannot be read, the same way every time:
// a missing file is "no such file" even when many frames are checked at once (sharp alone answers that from a
// process-wide libvips error buffer, and under concurrency sometimes calls a missing file an unsupported format).
import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";
import { beforeAll, describe, expect, it } from "vitest";
import { checkImages } from "../src/train/image-check.js";
import { decodeRgb } from "../src/train/images.js";
import type { SftRow } from "../src/train/rows.js";

describe("train image check - why a frame cannot be read", () => {
  let dir: string;
  const row = (image: string, line: number): SftRow => ({ image, name: "n", code: "1", line });

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "rlloop-image-check-"));
    const png = await sharp({ create: { width: 8, height: 6, channels: 3, background: { r: 10, g: 200, b: 30 } } }).png().toBuffer();
    for (let i = 0; i < 15; i++) await writeFile(join(dir, `ok-${i}.png`), png);
    await writeFile(join(dir, "text.png"), "not an image\n");
    await mkdir(join(dir, "folder.png"));
  });

  it("a missing frame checked while other decodes fail concurrently is 'no such file', every time", async () => {
    for (let attempt = 0; attempt < 40; attempt++) {
      const rows = Array.from({ length: 15 }, (_, i) => row(join(dir, `ok-${i}.png`), i + 1));
      rows.splice(attempt % 16, 0, row(join(dir, "missing.png"), 99));
      // undecodable frames elsewhere in the process write to libvips' shared error buffer meanwhile
      const noise = Array.from({ length: 8 }, () => decodeRgb(join(dir, "text.png"), "noise").catch(() => null));
      await expect(checkImages(rows, "rows.jsonl")).rejects.toThrow(`rows.jsonl line 99: image ${join(dir, "missing.png")}: cannot read (no such file)`);
      await Promise.all(noise);
    }
  });

  it("a folder is 'is a directory'; a file that is not an image keeps sharp's explanation", async () => {
    await expect(checkImages([row(join(dir, "folder.png"), 3)], "rows.jsonl")).rejects.toThrow(/line 3: image .*folder\.png: cannot read \(is a directory\)$/);
    await expect(checkImages([row(join(dir, "text.png"), 4)], "rows.jsonl")).rejects.toThrow(/line 4: image .*text\.png: cannot read \(.*unsupported image format.*\)$/);
  });

  it("the decoder gives the same reasons", async () => {
    await expect(decodeRgb(join(dir, "missing.png"), "row 7")).rejects.toThrow(/^row 7: image .*missing\.png: cannot read \(no such file\)$/);
    await expect(decodeRgb(join(dir, "folder.png"), "row 8")).rejects.toThrow(/^row 8: image .*folder\.png: cannot read \(is a directory\)$/);
    const frame = await decodeRgb(join(dir, "ok-0.png"), "row 9");
    expect([frame.width, frame.height, frame.rgb.length]).toEqual([8, 6, 8 * 6 * 3]);
  });
});
