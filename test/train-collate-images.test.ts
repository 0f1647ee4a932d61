// Rows with frames: rlloop's collation (template, tokenizer, sharp decode, native preprocessImage, pad expansion)
// against transformers' apply_chat_template + Qwen3VLProcessor (scripts/reference/collate_reference.py) on the
// real Qwen3.5 tokenizer and template. Ids and grids exactly equal; pixel values within 1e-6 absolute.
import { copyFile, mkdtemp, utimes } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { CachedFrames } from "../src/train/cached-frames.js";
import { ModelAssets } from "../src/train/model-assets.js";
import { loadCollator, type Collator } from "../src/train/collate.js";
import { compilePrompt } from "../src/train/prompt.js";
import { readRows, type PpoRow } from "../src/train/rows.js";
import { readSafetensors, type Tensor } from "./helpers/safetensors.js";
import { cacheKey, cachedDir, REFERENCE, realTokenizerDir, runPython } from "./helpers/train-fixtures.js";
import { figure, PROMPT, trainFixture } from "./helpers/train-run.js";

describe("train collate - rows with frames against transformers' processor", () => {
  let rows: PpoRow[];
  let golden: Map<string, Tensor>;
  let collator: Collator;
  let data: string;
  beforeAll(async () => {
    const [fx, tokenizerDir] = [await trainFixture(), await realTokenizerDir()];
    data = join(fx, "ppo.jsonl");
    rows = await readRows(data, "ppo");
    const out = await cachedDir("train-collate-golden", cacheKey([join(REFERENCE, "collate_reference.py"), data, join(tokenizerDir, "tokenizer.json")]), (dir) =>
      runPython("collate_reference.py", [tokenizerDir, data, join(fx, "prompt.jinja"), dir]).then(() => undefined),
    );
    golden = await readSafetensors(join(out, "collate.safetensors"));
    collator = await loadCollator(new ModelAssets(tokenizerDir), compilePrompt(PROMPT));
  });

  it("gives the processor's ids, grids and pixel values for every row", async () => {
    let worstPixel = 0;
    for (const [i, row] of rows.entries()) {
      const input = await collator.row(row, data);
      expect(Array.from(input.inputIds), `row ${i} ids`).toEqual(Array.from(golden.get(`ids.${i}`)!.data));
      expect(Array.from(input.images[0]!.grid), `row ${i} grid`).toEqual(Array.from(golden.get(`grid.${i}`)!.data));
      const want = golden.get(`pixels.${i}`)!.data;
      const got = input.images[0]!.pixelValues!;
      expect(got.length).toBe(want.length);
      let worst = 0;
      for (let k = 0; k < want.length; k++) worst = Math.max(worst, Math.abs(got[k]! - want[k]!));
      expect(worst, `row ${i} pixels`).toBeLessThanOrEqual(1e-6);
      worstPixel = Math.max(worstPixel, worst);
      expect(input.scoreCount).toBe(row.code.length + 1);
      expect(input.scoreStart).toBe(input.inputIds.length - row.code.length - 1);
    }
    figure(`collate: pixel values vs Qwen3VLProcessor, worst of ${rows.length} rows (ids and grids equal)`, worstPixel, 1e-6);
  });

  it("with the model's vision cache: a cached frame is sent as key and grid only; a rewritten file is a new key", async () => {
    const cached = new Set<string>();
    const frames = new CachedFrames({ visionCached: (key) => cached.has(key) });
    const withCache = await loadCollator(new ModelAssets(await realTokenizerDir()), compilePrompt(PROMPT), frames);
    const dir = await mkdtemp(join(tmpdir(), "rlloop-frames-"));
    const frame = join(dir, "frame.png");
    await copyFile(rows[0]!.image, frame);
    const row = { ...rows[0]!, image: frame };

    const first = (await withCache.row(row, data)).images[0]!;
    expect(first.pixelValues).toBeInstanceOf(Float32Array);
    expect(first.cacheKey).toMatch(/frame\.png\|/);
    const again = (await withCache.row(row, data)).images[0]!;
    expect(again.pixelValues, "not cached by the model yet: pixels again").toBeInstanceOf(Float32Array);

    cached.add(first.cacheKey!);
    const hit = await withCache.row(row, data);
    expect(hit.images[0]).toEqual({ grid: first.grid, cacheKey: first.cacheKey });
    const plain = await collator.row(row, data);
    expect(Array.from(hit.inputIds)).toEqual(Array.from(plain.inputIds)); // same ids without reading the frame

    await utimes(frame, new Date(), new Date(Date.now() + 5000));
    const rewritten = (await withCache.row(row, data)).images[0]!;
    expect(rewritten.cacheKey).not.toBe(first.cacheKey);
    expect(rewritten.pixelValues).toBeInstanceOf(Float32Array);
  });
});
