// The conformance fixture set (scripts/reference/conformance_fixtures.py, one Python process, cached): two tiny
// Qwen3.5 checkpoints "a" and "b", test PNGs, transformers' forward goldens of the "long" (one 179-token row, two
// images) and "rows" (three rows of 43/85/30 tokens, one image each) batches, and PEFT's LoRA goldens.
// Also the test-side image path: PNG → sharp → RGB bytes → the native preprocessImage, so comparing the module's
// results with transformers' covers preprocessing too.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import sharp from "sharp";
import { preprocessImage, type ImagePatches, type ImageProcessorOptions, type RowInput } from "../../src/native.js";
import { pythonFixture } from "./fixture-cache.js";
import { readSafetensors, type Tensor } from "./safetensors.js";

export const MODEL_NAMES = ["a", "b"] as const;
export type ModelName = (typeof MODEL_NAMES)[number];
export const BATCH_NAMES = ["long", "rows"] as const;
export type BatchName = (typeof BATCH_NAMES)[number];

export interface ModelSummary {
  name: ModelName;
  dir: string;
  hiddenSize: number;
  numLayers: number;
  layerTypes: string[];
  vocabSize: number;
  image_token_id: number;
  video_token_id: number;
  vision_start_token_id: number;
  vision_end_token_id: number;
  storage: { dtype: string; max_shard_size: string | null; mtp: boolean };
}

export interface Manifest {
  models: Record<ModelName, ModelSummary>;
  lora: Record<ModelName, { r: number; alpha: number }>;
}

export interface GoldenImage {
  name: string;
  /** relative to the fixture root */
  png: string;
  grid: [number, number, number];
}

export interface GoldenRow {
  inputIds: number[];
  images: GoldenImage[];
  scoreStart: number;
  scoreCount: number;
  targets: number[];
  /** transformers' argmax == target at each scored position */
  correct: boolean[];
  /** top-1 minus top-2 logit at each scored position */
  margin: number[];
  ropeDelta: number;
  maxAbsHidden: number;
}

export interface BatchGolden {
  batch: BatchName;
  rows: GoldenRow[];
  numLayers: number;
  tensors: Map<string, Tensor>;
}

export interface PpoGolden {
  n: number;
  old: number[];
  ref: number[];
  adv: number[];
  weight: number[];
  clip: number;
  beta: number;
  scale: number;
  loss: number;
  ratio: number[];
  pg: number[];
  kl: number[];
}

export interface LoraGolden {
  r: number;
  alpha: number;
  targetModules: string;
  gradBatch: BatchName;
  /** PEFT adapter keys, sorted */
  keys: string[];
  ppo: PpoGolden;
  sft: { scale: number; loss: number };
  adapterDir: string;
  /** logp.<batch>.row.<r>, grad.<ppo|sft>.<key> */
  tensors: Map<string, Tensor>;
}

export class ConformanceFixtures {
  constructor(readonly root: string, readonly manifest: Manifest) {}

  modelDir(name: ModelName): string {
    return join(this.root, this.manifest.models[name].dir);
  }

  batchJsonPath(name: ModelName, batch: BatchName): string {
    return join(this.root, "golden", name, `${batch}.json`);
  }

  async batch(name: ModelName, batch: BatchName): Promise<BatchGolden> {
    const json = JSON.parse(await readFile(this.batchJsonPath(name, batch), "utf8")) as Omit<BatchGolden, "tensors">;
    const tensors = await readSafetensors(join(this.root, "golden", name, `${batch}.safetensors`));
    return { ...json, tensors };
  }

  async lora(name: ModelName): Promise<LoraGolden> {
    const dir = join(this.root, "lora", name);
    const json = JSON.parse(await readFile(join(dir, "lora.json"), "utf8")) as Omit<LoraGolden, "tensors" | "adapterDir">;
    return { ...json, adapterDir: join(dir, "adapter"), tensors: await readSafetensors(join(dir, "lora.safetensors")) };
  }
}

export async function conformanceFixtures(): Promise<ConformanceFixtures> {
  const root = await pythonFixture({ name: "conformance", script: "conformance_fixtures.py", args: ["--seed", "0"] });
  const manifest = JSON.parse(await readFile(join(root, "manifest.json"), "utf8")) as Manifest;
  return new ConformanceFixtures(root, manifest);
}

/** preprocessor_config.json → the native image processor's options (size.* are pixel counts, qwen35.md §8). */
export async function imageOptions(modelDir: string): Promise<ImageProcessorOptions> {
  const c = JSON.parse(await readFile(join(modelDir, "preprocessor_config.json"), "utf8")) as {
    size: { shortest_edge: number; longest_edge: number };
    patch_size: number; temporal_patch_size: number; merge_size: number;
    image_mean: [number, number, number]; image_std: [number, number, number];
  };
  return {
    patchSize: c.patch_size, temporalPatchSize: c.temporal_patch_size, mergeSize: c.merge_size,
    minPixels: c.size.shortest_edge, maxPixels: c.size.longest_edge, mean: c.image_mean, std: c.image_std,
  };
}

export interface Rgb {
  rgb: Uint8Array;
  width: number;
  height: number;
}

/** 8-bit RGB of a PNG as PIL's convert("RGB") gives it (the test PNGs are RGB without a colour profile). */
export async function decodePng(path: string): Promise<Rgb> {
  const { data, info } = await sharp(path).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  if (info.channels !== 3) throw new Error(`${path}: decoded to ${info.channels} channels, expected 3`);
  return { rgb: new Uint8Array(data.buffer, data.byteOffset, data.byteLength), width: info.width, height: info.height };
}

/** Native preprocessing of every image the rows use, by image name. */
export async function nativePatches(root: string, rows: GoldenRow[], options: ImageProcessorOptions): Promise<Map<string, ImagePatches>> {
  const out = new Map<string, ImagePatches>();
  for (const image of rows.flatMap((r) => r.images)) {
    if (out.has(image.name)) continue;
    const { rgb, width, height } = await decodePng(join(root, image.png));
    out.set(image.name, await preprocessImage(rgb, width, height, options));
  }
  return out;
}

export function rowInputs(rows: GoldenRow[], patches: Map<string, ImagePatches>): RowInput[] {
  return rows.map((row) => ({
    inputIds: Int32Array.from(row.inputIds),
    images: row.images.map((im) => {
      const p = patches.get(im.name);
      if (!p) throw new Error(`no patches for image ${im.name}`);
      return p;
    }),
    scoreStart: row.scoreStart,
    scoreCount: row.scoreCount,
  }));
}

/** The rows of a golden batch as native inputs, images preprocessed natively. */
export async function goldenRowInputs(fx: ConformanceFixtures, name: ModelName, golden: BatchGolden): Promise<RowInput[]> {
  const patches = await nativePatches(fx.root, golden.rows, await imageOptions(fx.modelDir(name)));
  return rowInputs(golden.rows, patches);
}
