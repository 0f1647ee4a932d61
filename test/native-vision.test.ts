// The vision side of the native module against transformers 5.17 (scripts/reference/vision_golden.py):
// preprocessImage against Qwen2VLImageProcessor on PNGs that walk every smart_resize branch (qwen35.md §8), decoded
// with sharp exactly as the trainer decodes frames; the vision tower's merged features (§7) and the M-RoPE position
// ids (§10.1) through model.inspect, on two rows holding two images of different grids in both orders.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Model, preprocessImage, type DType, type ImageProcessorOptions, type RowInput } from "../src/native.js";
import { decodeRgb } from "../src/train/images.js";
import { batchItem, expectAllClose } from "./helpers/compare.js";
import { pythonFixture } from "./helpers/fixture-cache.js";
import { readSafetensors, type Tensor } from "./helpers/safetensors.js";

interface ProcessorCase {
  name: string;
  png: string;
  width: number;
  height: number;
  options: ImageProcessorOptions;
  grid: [number, number, number];
}

interface VisionRow {
  inputIds: number[];
  images: string[];
  scoreStart: number;
  scoreCount: number;
}

interface VisionGolden {
  processor: ProcessorCase[];
  model: string;
  imageTokenId: number;
  rows: VisionRow[];
  /** max |bf16 - fp32| of transformers' own tower on the row images */
  bf16FeatureError: number;
}

const PIXEL_ATOL = 1e-6; // the processor is reproduced to the bit; 1e-6 leaves room for nothing but fp32 rounding
const FEATURE_ATOL_FP32 = 1e-4; // qwen35.md §17 measured 1.7e-6 for an independent fp32 tower
const BF16_BUDGET_FACTOR = 2; // a bf16 tower may be off the fp32 reference by twice transformers' own bf16 error

const QWEN: ImageProcessorOptions = {
  patchSize: 16, temporalPatchSize: 2, mergeSize: 2, minPixels: 65536, maxPixels: 16777216,
  mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5],
};

const root = await pythonFixture({ name: "vision", script: "vision_golden.py", args: ["--seed", "0"] });
const golden = JSON.parse(await readFile(join(root, "vision.json"), "utf8")) as VisionGolden;
const tensors = await readSafetensors(join(root, "vision.safetensors"));
const cases = new Map(golden.processor.map((c) => [c.name, c]));

function tensor(name: string): Tensor {
  const t = tensors.get(name);
  if (!t) throw new Error(`vision.safetensors has no tensor '${name}'`);
  return t;
}

async function nativePatches(c: ProcessorCase) {
  const frame = await decodeRgb(join(root, c.png), c.name);
  expect([frame.width, frame.height]).toEqual([c.width, c.height]);
  return preprocessImage(frame.rgb, frame.width, frame.height, c.options);
}

describe("native vision - preprocessImage matches Qwen2VLImageProcessor", () => {
  it.each(golden.processor.map((c) => [`${c.name} ${c.width}x${c.height} -> grid [${c.grid}]`, c] as const))(
    "%s",
    async (_label, c) => {
      const patches = await nativePatches(c);
      expect(patches.grid).toEqual(c.grid);
      const expected = tensor(`processor.${c.name}.pixel_values`);
      expectAllClose(`${c.name} pixel values`, patches.pixelValues, expected.data, expected.shape, PIXEL_ATOL);
    },
  );

  it("gives each frame the same values when many run at once on the thread pool", async () => {
    const frames = await Promise.all(golden.processor.map((c) => decodeRgb(join(root, c.png), c.name)));
    const one: Awaited<ReturnType<typeof preprocessImage>>[] = [];
    for (const [i, f] of frames.entries()) one.push(await preprocessImage(f.rgb, f.width, f.height, golden.processor[i]!.options));
    const together = await Promise.all(
      [...frames, ...frames].map((f, i) => preprocessImage(f.rgb, f.width, f.height, golden.processor[i % frames.length]!.options)),
    );
    together.forEach((p, i) => {
      expect(p.grid).toEqual(one[i % frames.length]!.grid);
      expect(Buffer.from(p.pixelValues.buffer).equals(Buffer.from(one[i % frames.length]!.pixelValues.buffer)), `frame ${i}`).toBe(true);
    });
  });

  it("rejects an aspect ratio above 200", () => {
    expect(() => preprocessImage(new Uint8Array(201 * 3), 201, 1, QWEN)).toThrow(/aspect ratio must be at most 200/);
  });

  it("rejects an image that no multiple of 32 fits within maxPixels", () => {
    const options = { ...QWEN, minPixels: 0, maxPixels: 4096 };
    expect(() => preprocessImage(new Uint8Array(4000 * 100 * 3), 4000, 100, options)).toThrow(/within maxPixels 4096/);
  });

  it("rejects minPixels above maxPixels", () => {
    expect(() => preprocessImage(new Uint8Array(64 * 64 * 3), 64, 64, { ...QWEN, minPixels: 5000, maxPixels: 4096 }))
      .toThrow(/minPixels <= maxPixels/);
  });

  it("rejects an rgb buffer shorter than width*height*3", () => {
    expect(() => preprocessImage(new Uint8Array(64 * 64 * 3 - 1), 64, 64, QWEN)).toThrow();
  });
});

describe("native vision - tower features and M-RoPE positions through model.inspect", () => {
  async function rowInputs(): Promise<RowInput[]> {
    const patches = new Map<string, Awaited<ReturnType<typeof nativePatches>>>();
    for (const name of new Set(golden.rows.flatMap((r) => r.images))) {
      patches.set(name, await nativePatches(cases.get(name)!));
    }
    return golden.rows.map((r) => ({
      inputIds: Int32Array.from(r.inputIds),
      images: r.images.map((n) => patches.get(n)!),
      scoreStart: r.scoreStart,
      scoreCount: r.scoreCount,
    }));
  }

  async function inspect(dtype: DType) {
    const model = await Model.load(join(root, golden.model), { device: "cpu", dtype });
    const batch = await model.prepare(await rowInputs());
    return { model, result: await model.inspect(batch, { adapter: null }) };
  }

  function expectFeatures(features: Float32Array[], atol: number, label: string): void {
    const images = golden.rows.flatMap((r) => r.images);
    expect(features).toHaveLength(images.length);
    images.forEach((name, i) => {
      const expected = tensor(`image.${name}.features`);
      expectAllClose(`${label} row image ${i} (${name})`, features[i]!, expected.data, expected.shape, atol);
    });
  }

  it("float32: features of every image within 1e-4, position ids identical to get_rope_index", async () => {
    const { result } = await inspect("float32");
    expectFeatures(result.visionFeatures, FEATURE_ATOL_FP32, "fp32");

    const B = golden.rows.length;
    const L = result.positionIds.length / (3 * B);
    golden.rows.forEach((row, b) => {
      const expected = tensor(`row.${b}.position_ids`); // [3, row length]
      const n = row.inputIds.length;
      for (let axis = 0; axis < 3; axis++) {
        const actual = batchItem(result.positionIds, axis * B + b, L, 1, n);
        expect(Array.from(actual), `row ${b} axis ${"THW"[axis]}`).toEqual(
          Array.from(expected.data.subarray(axis * n, (axis + 1) * n)),
        );
      }
    });
  });

  it("bfloat16: features within twice transformers' own bf16 error of the fp32 reference", async () => {
    const { result } = await inspect("bfloat16");
    const budget = BF16_BUDGET_FACTOR * golden.bf16FeatureError;
    expect(budget).toBeGreaterThan(0);
    expectFeatures(result.visionFeatures, budget, "bf16");
  });

  it("rejects a row whose image pads do not match its image grid", async () => {
    const model = await Model.load(join(root, golden.model), { device: "cpu", dtype: "float32" });
    const [row] = await rowInputs();
    const pad = row!.inputIds.indexOf(golden.imageTokenId);
    const short = Int32Array.from([...row!.inputIds.subarray(0, pad), ...row!.inputIds.subarray(pad + 1)]);
    const bad = { ...row!, inputIds: short, scoreStart: row!.scoreStart - 1 };
    await expect(model.prepare([bad]).then((batch) => model.inspect(batch, { adapter: null }))).rejects.toThrow(
      /image/,
    );
  });

  it("vision cache: keyed images are computed once; later batches send only key and grid and read the same features", async () => {
    const model = await Model.load(join(root, golden.model), { device: "cpu", dtype: "float32" });
    const keyed = (rows: RowInput[], pixels: boolean): RowInput[] =>
      rows.map((r, b) => ({
        ...r,
        images: r.images.map((img, i) => ({
          grid: img.grid,
          cacheKey: `${golden.rows[b]!.images[i]}`,
          ...(pixels ? { pixelValues: img.pixelValues! } : {}),
        })),
      }));
    const rows = await rowInputs();
    const plain = await model.inspect(await model.prepare(rows), { adapter: null });
    expect(model.visionCacheStats().entries).toBe(0);

    const first = await model.inspect(await model.prepare(keyed(rows, true)), { adapter: null });
    const distinct = new Set(golden.rows.flatMap((r) => r.images)).size;
    const stats = model.visionCacheStats();
    expect(stats.entries).toBe(distinct);
    expect(stats.bytes).toBeGreaterThan(0);
    for (const name of golden.rows.flatMap((r) => r.images)) expect(model.visionCached(name)).toBe(true);

    const second = await model.inspect(await model.prepare(keyed(rows, false)), { adapter: null });
    for (const result of [first, second]) {
      result.visionFeatures.forEach((f, i) => expect(f).toEqual(plain.visionFeatures[i]));
      expect(result.logits).toEqual(plain.logits);
    }

    await model.clearVisionCache();
    expect(model.visionCacheStats()).toEqual({ entries: 0, bytes: 0 });
    await expect(model.prepare(keyed(rows, false))).rejects.toThrow(/not in the model's vision cache/);
    await expect(model.prepare([{ ...rows[0]!, images: [{ grid: rows[0]!.images[0]!.grid }] }])).rejects.toThrow(
      /pixelValues must be a Float32Array \(or a cacheKey/,
    );
  });

  it("vision cache: a batch prepared with pixels before its frames were cached reads the cached features (decided when it runs)", async () => {
    // The trainer prepares a batch while earlier ones still run: whether a frame is cached by then is a race, so
    // the forward decides from the cache as earlier forwards left it. Probe: batch B carries batch A's key for its
    // first image with other pixels (it must read A's features) and a key of its own for the second (computed,
    // alone: its pixels are sliced out after the dropped image's); C, prepared after A ran, is the reference.
    const model = await Model.load(join(root, golden.model), { device: "cpu", dtype: "float32" });
    const row = (await rowInputs())[0]!;
    expect(row.images.length).toBe(2);
    const image = (i: number, cacheKey: string, pixelValues?: Float32Array) => ({ grid: row.images[i]!.grid, cacheKey, ...(pixelValues ? { pixelValues } : {}) });
    const real = (i: number) => row.images[i]!.pixelValues!;
    const negated = Float32Array.from(real(0), (v) => -v); // same shape, other content
    const a = await model.prepare([{ ...row, images: [image(0, "first", real(0)), image(1, "a-second", real(1))] }]);
    const b = await model.prepare([{ ...row, images: [image(0, "first", negated), image(1, "b-second", real(1))] }]);
    expect(model.visionCached("first")).toBe(false); // B was prepared before A ran
    const first = await model.inspect(a, { adapter: null });
    const late = await model.inspect(b, { adapter: null });
    const c = await model.prepare([{ ...row, images: [image(0, "first"), image(1, "c-second", real(1))] }]);
    const reference = await model.inspect(c, { adapter: null });
    expect(late.visionFeatures[0]).toEqual(first.visionFeatures[0]);
    expect(late.visionFeatures[1]).toEqual(reference.visionFeatures[1]);
    expect(late.logits).toEqual(reference.logits);
    expect(model.visionCached("b-second")).toBe(true);
  });

  it("vision cache: a zero budget keeps nothing and every batch needs its pixels", async () => {
    const model = await Model.load(join(root, golden.model), { device: "cpu", dtype: "float32", visionCacheBytes: 0 });
    const [row] = await rowInputs();
    const keyedRow = { ...row!, images: row!.images.map((img, i) => ({ ...img, cacheKey: `k${i}` })) };
    await model.logprobs(await model.prepare([keyedRow]), { adapter: null });
    expect(model.visionCacheStats().entries).toBe(0);
    expect(model.visionCached("k0")).toBe(false);
  });
});
