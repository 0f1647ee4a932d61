// The typed binding of the native module (native/build/Release/rlloop_native.node): the only file that loads it.
// The contract is docs/native-api.md; the C++ side lives in native/src (js/binding.cpp is the glue this file calls).
// Heavy calls return promises settled from each model's own worker thread; synchronous methods validate their
// arguments and queue the change on that worker, so calls take effect in the order they were made. Methods that
// return a promise report every error, bad arguments included, as a rejection.
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import type { Attention, Checkpointing, Device, DType, Tf32 } from "./contract/index.js";

// device, compute dtype of the base model (LoRA masters are always float32), checkpointing per decoder layer: the
// trainer job's own types (src/contract/job.ts)
export type { Attention, Checkpointing, Device, DType, Tf32 };

export interface LoadOptions {
  device?: Device;
  dtype?: DType;
  checkpointing?: Checkpointing;
  /** Budget of the vision-feature cache (features of keyed images, on the model's device); 0 disables it. 4 GiB. */
  visionCacheBytes?: number;
  /**
   * TF32 for the float32 matrix products on CUDA; "auto" (the default): on for a bfloat16 model, off for float32.
   * libtorch keeps it per process: a CUDA model whose choice differs from an open one's is refused.
   */
  tf32?: Tf32;
  /** The attention backend on CUDA: "flash" (the default; PyTorch's own kernels) or "cudnn". Per process as tf32. */
  attention?: Attention;
  /**
   * A stand-in instead of the checkpoint: the config's shapes with one decoder layer of each kind and one vision
   * block, weights zeros made on the device, nothing read but config.json. It runs the real model's
   * kernels at its shapes, so a process can pay their first-use costs while the real weights load
   * (src/train/warm-up.ts). False by default.
   */
  standIn?: boolean;
}

/** From preprocessor_config.json (qwen35.md §8). */
export interface ImageProcessorOptions {
  patchSize: number;
  temporalPatchSize: number;
  mergeSize: number;
  minPixels: number;
  maxPixels: number;
  mean: [number, number, number];
  std: [number, number, number];
}

export interface ImagePatches {
  pixelValues: Float32Array; // [gh*gw, 3*T*P*P], rows in merge-block order
  grid: [number, number, number]; // [t, gh, gw]
}

/**
 * An image of a row. With a cacheKey, its vision features are kept in the model's vision cache once computed, and a
 * later batch may omit pixelValues for that key while model.visionCached(key) is true.
 */
export interface ImageInput {
  pixelValues?: Float32Array; // [gh*gw, 3*T*P*P], rows in merge-block order
  grid: [number, number, number]; // [t, gh, gw]
  cacheKey?: string;
}

export interface RowInput {
  inputIds: Int32Array; // the whole row, image pads already expanded (gh*gw/merge² per image)
  images: ImageInput[]; // one per <|vision_start|><|image_pad|>… block, in order
  scoreStart: number; // index of the first scored token
  scoreCount: number; // scored tokens = inputIds[scoreStart, scoreStart + scoreCount)
}

export interface LoraSpec {
  r: number;
  alpha: number;
  targetModules: string; // regex, Python re.fullmatch on paths like "model.language_model.layers.3.self_attn.q_proj"
  seed: number;
}

export interface NamedTensor {
  shape: number[];
  data: Float32Array;
}
export type NamedTensors = Record<string, NamedTensor>;

export type LayerType = "linear_attention" | "full_attention";

export interface ModelInfo {
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  vocabSize: number;
  layerTypes: LayerType[];
  imageTokenId: number;
  videoTokenId: number;
  visionStartTokenId: number;
  visionEndTokenId: number;
  vision: { patchSize: number; temporalPatchSize: number; mergeSize: number; inChannels: number; depth: number; hiddenSize: number } | null;
  device: Device;
  dtype: DType;
  loraModules: string[]; // module paths of every LoRA-capable Linear, in layer order
}

export interface LogprobsResult {
  logp: Float32Array; // B*K
  correct: Uint8Array; // B*K, argmax == target
  K: number;
}

export type Objective =
  | { kind: "sft"; scale: number }
  | {
      kind: "ppo";
      n: number; // code tokens: the first n scored tokens (K = n + 1 with <|im_end|>)
      // Absent: the step is on-policy (no update since the round began), old or ref are this forward's own
      // log-probs, detached (ratio 1, kl 0); a round's first update uses it instead of a frozen pass over its rows.
      old?: Float32Array; // B: Σ old logp of the code tokens
      ref?: Float32Array; // B*n
      adv: Float32Array; // B
      clip: number;
      beta: number;
      scale: number;
      weight?: Float32Array; // B, per-row importance weight; default 1
    };

export interface BackwardResult {
  loss: number; // the scaled loss
  logp: Float32Array; // B*K, this forward's
  recomputedLayers: number; // decoder layers whose forward the backward repeated (gradient checkpointing)
  pg?: Float32Array; // B each, ppo
  kl?: Float32Array;
  ratio?: Float32Array;
}

export interface InspectResult {
  visionFeatures: Float32Array[]; // per image, [gh*gw/4, hidden] after the merger
  positionIds: Int32Array; // [3, B, L]
  hiddenStates: Float32Array[]; // numLayers + 1 entries [B, L, hidden]; the last after the final norm
  logits: Float32Array; // [B, K, vocab]
}

export interface OptimizerOptions {
  lr: number;
  betas: [number, number];
  eps: number;
  weightDecay: number;
  group?: ProcessGroup;
}

export interface ProcessGroupOptions {
  backend: "nccl" | "gloo";
  rank: number;
  worldSize: number;
  masterAddr: string;
  masterPort: number;
  device: Device;
  timeoutS?: number;
}

/** The caching allocator's figures for an accelerator (all zero on the CPU, which has no such allocator). */
export interface DeviceMemoryStats {
  allocatedBytes: number;
  peakAllocatedBytes: number; // since resetPeakMemoryStats (or the start)
  reservedBytes: number;
}

/** Options of deltaRuleCheck: random inputs of `sequences` (B·H) x `length` tokens, heads of `dim`. */
export interface DeltaRuleCheckOptions {
  sequences?: number;
  length?: number;
  dim?: number;
  seed?: number;
  device?: Device;
  tf32?: boolean; // TF32 products on CUDA for the check (both implementations)
  repeats?: number; // timed runs of each implementation (0: no timing)
}

/** Relative L2 errors against a float64 run of the ATen formulation. */
export interface DeltaRuleErrors {
  output: number;
  grads: { q: number; k: number; v: number; beta: number; g: number };
}

export interface DeltaRuleTiming {
  forwardMs: number; // median, no graph
  trainingMs: number; // median, forward with the graph + backward
}

export interface DeltaRuleCheck {
  kernels: DeltaRuleErrors; // the fused kernels (delta_rule/fused.h)
  chunks: DeltaRuleErrors; // the ATen formulation (delta_rule/aten.h)
  kernelsTime: DeltaRuleTiming;
  chunksTime: DeltaRuleTiming;
  kernelsApply: boolean; // whether the model would run the kernels on these inputs
  /** A NaN (CUDA's canonical one, either sign) planted in q, k, v or the output's gradient of one sequence that did
   *  not reach its results, or reached the other sequence's: empty when every one arrived where it should. */
  nanLost: string[];
}

export interface VisionCacheStats {
  entries: number;
  bytes: number;
}

/** A prepared batch (opaque): right-padded rows on the model's device; vision features cached on first use. */
export interface Batch {
  readonly B: number;
  readonly L: number;
  readonly K: number;
}

// ---------------------------------------------------------------------------------------------------------------
// The addon's raw exports (js/binding.cpp).

interface NativeModel {
  info(): ModelInfo;
  prepare(rows: RowInput[]): Promise<Batch>;
  logprobs(batch: Batch, adapter: string | null): Promise<LogprobsResult>;
  backward(batch: Batch, objective: Objective): Promise<BackwardResult>;
  inspect(batch: Batch, adapter: string | null): Promise<InspectResult>;
  addAdapter(name: string, spec: LoraSpec): void;
  removeAdapter(name: string): void;
  loadAdapter(name: string, dir: string): Promise<void>;
  saveAdapter(name: string, dir: string): Promise<void>;
  setTrainable(name: string | null): void;
  adapterNames(): string[];
  adapterTensors(name: string): Promise<NamedTensors>;
  setAdapterTensors(name: string, tensors: NamedTensors): Promise<void>;
  gradients(name: string): Promise<NamedTensors>;
  visionCached(key: string): boolean;
  visionCacheStats(): VisionCacheStats;
  clearVisionCache(): Promise<void>;
  close(): Promise<void>;
}

interface NativeOptimizer {
  step(opts: { lr: number; maxGradNorm?: number }): Promise<{ gradNorm: number }>;
  save(path: string): Promise<void>;
  saveWithAdapter(dir: string, file: string): Promise<void>;
  load(path: string): Promise<void>;
}

interface NativeProcessGroup {
  readonly rank: number;
  readonly worldSize: number;
  allReduce(data: Float32Array, op: "sum" | "mean"): Promise<Float32Array>;
  barrier(): Promise<void>;
  close(): Promise<void>;
}

interface Addon {
  loadModel(dir: string, opts: Required<Pick<LoadOptions, "device" | "dtype">> & LoadOptions): Promise<NativeModel>;
  preprocessImage(rgb: Uint8Array, width: number, height: number, opts: ImageProcessorOptions): Promise<ImagePatches>;
  deviceMemoryStats(device: string): DeviceMemoryStats;
  resetPeakMemoryStats(device: string): void;
  deltaRuleCheck(options: DeltaRuleCheckOptions): DeltaRuleCheck;
  NativeOptimizer: new (
    model: NativeModel,
    adapter: string,
    lr: number,
    beta1: number,
    beta2: number,
    eps: number,
    weightDecay: number,
    group: NativeProcessGroup | null,
  ) => NativeOptimizer;
  initProcessGroup(
    backend: string,
    rank: number,
    worldSize: number,
    masterAddr: string,
    masterPort: number,
    device: string,
    timeoutS: number,
  ): Promise<NativeProcessGroup>;
}

const ROOT = join(dirname(fileURLToPath(import.meta.url)), ".."); // src/ and dist/ both sit in the repo root
export const NATIVE_MODULE_PATH = join(ROOT, "native", "build", "Release", "rlloop_native.node");

let cached: Addon | undefined;

/** Loads the addon once; a clear error when it has not been built. */
function addon(): Addon {
  if (cached) return cached;
  if (!existsSync(NATIVE_MODULE_PATH)) {
    throw new Error(`the native module is not built (${NATIVE_MODULE_PATH} is missing): run npm run build:native`);
  }
  try {
    cached = createRequire(import.meta.url)(NATIVE_MODULE_PATH) as Addon;
  } catch (err) {
    throw new Error(`cannot load the native module ${NATIVE_MODULE_PATH}: ${(err as Error).message}; rebuild it with npm run build:native`, {
      cause: err,
    });
  }
  return cached;
}

// ---------------------------------------------------------------------------------------------------------------

/**
 * A frame's pixel values and grid (qwen35.md §8). Bad arguments, options or sizes throw at the call; the work runs
 * on libuv's thread pool, so several frames are preprocessed at once and the JS thread goes on. `rgb` must not be
 * written until the promise settles.
 */
export function preprocessImage(rgb: Uint8Array, width: number, height: number, opts: ImageProcessorOptions): Promise<ImagePatches> {
  return addon().preprocessImage(rgb, width, height, opts);
}

export function deviceMemoryStats(device: Device): DeviceMemoryStats {
  return addon().deviceMemoryStats(device);
}

export function resetPeakMemoryStats(device: Device): void {
  addon().resetPeakMemoryStats(device);
}

/**
 * The delta rule's fused kernels and its ATen formulation against a float64 reference on random inputs, and
 * (with repeats) their timings: a diagnostic (test/native-delta-rule-kernels.test.ts, bench/gpu/delta_rule_check.mjs).
 */
export function deltaRuleCheck(options: DeltaRuleCheckOptions = {}): DeltaRuleCheck {
  return addon().deltaRuleCheck(options);
}

export class Model {
  readonly info: ModelInfo;

  private constructor(readonly native: NativeModel) {
    this.info = native.info();
  }

  /** A Hugging Face Qwen3.5 folder (config.json + model.safetensors or an index with shards). */
  static async load(dir: string, opts: LoadOptions = {}): Promise<Model> {
    const native = await addon().loadModel(dir, { ...opts, device: opts.device ?? "cpu", dtype: opts.dtype ?? "float32" });
    return new Model(native);
  }

  get device(): Device {
    return this.info.device;
  }

  get dtype(): DType {
    return this.info.dtype;
  }

  async prepare(rows: RowInput[]): Promise<Batch> {
    return this.native.prepare(rows);
  }

  async logprobs(batch: Batch, opts: { adapter: string | null }): Promise<LogprobsResult> {
    return this.native.logprobs(batch, opts.adapter);
  }

  /** Accumulates into the trainable adapter's .grad. */
  async backward(batch: Batch, objective: Objective): Promise<BackwardResult> {
    return this.native.backward(batch, objective);
  }

  async inspect(batch: Batch, opts: { adapter: string | null }): Promise<InspectResult> {
    return this.native.inspect(batch, opts.adapter);
  }

  /** Fresh adapter: A ~ U(±1/√in), B = 0, float32. */
  addAdapter(name: string, spec: LoraSpec): void {
    this.native.addAdapter(name, spec);
  }

  /** Frees the adapter's tensors; the name can be used again. */
  removeAdapter(name: string): void {
    this.native.removeAdapter(name);
  }

  async loadAdapter(name: string, dir: string): Promise<void> {
    return this.native.loadAdapter(name, dir);
  }

  /** PEFT layout (adapter_config.json + adapter_model.safetensors), written atomically. */
  async saveAdapter(name: string, dir: string): Promise<void> {
    return this.native.saveAdapter(name, dir);
  }

  setTrainable(name: string | null): void {
    this.native.setTrainable(name);
  }

  adapterNames(): string[] {
    return this.native.adapterNames();
  }

  async adapterTensors(name: string): Promise<NamedTensors> {
    return this.native.adapterTensors(name);
  }

  async setAdapterTensors(name: string, tensors: NamedTensors): Promise<void> {
    return this.native.setAdapterTensors(name, tensors);
  }

  async gradients(name: string): Promise<NamedTensors> {
    return this.native.gradients(name);
  }

  /** Whether the features of an image with this cacheKey are cached (prepare() then needs no pixels for it). */
  visionCached(key: string): boolean {
    return this.native.visionCached(key);
  }

  visionCacheStats(): VisionCacheStats {
    return this.native.visionCacheStats();
  }

  /** Drops every cached vision feature, after the calls already made. */
  async clearVisionCache(): Promise<void> {
    return this.native.clearVisionCache();
  }

  /**
   * Frees the model's memory now, after the calls already made, rather than when the object is garbage-collected
   * (on an accelerator the allocator's cached blocks go back to the device too); later calls are refused. Await the
   * batches being prepared first: a prepare() still running holds the model until it ends. Batches and optimizers
   * made from it keep their tensors (an optimizer: the adapter's and its moments) until they are collected. Closing
   * again does nothing.
   */
  async close(): Promise<void> {
    return this.native.close();
  }
}

/** torch.optim.AdamW over one adapter's float32 masters (with a group: gradients averaged over the ranks first). */
export class Optimizer {
  private readonly native: NativeOptimizer;

  constructor(model: Model, adapter: string, opts: OptimizerOptions) {
    const [beta1, beta2] = opts.betas;
    this.native = new (addon().NativeOptimizer)(
      model.native,
      adapter,
      opts.lr,
      beta1,
      beta2,
      opts.eps,
      opts.weightDecay,
      opts.group?.native ?? null,
    );
  }

  /** all-reduce (mean) over the group if any, clip_grad_norm_, AdamW step, grads set to none. */
  async step(opts: { lr: number; maxGradNorm: number }): Promise<{ gradNorm: number }> {
    return this.native.step(opts);
  }

  /** optimizer.safetensors (exp_avg / exp_avg_sq per PEFT key) + optimizer.json sidecar. */
  async save(path: string): Promise<void> {
    return this.native.save(path);
  }

  /**
   * The adapter this optimizer trains (PEFT layout) and the optimizer's state as `dir/file` (with its JSON sidecar),
   * written at once: a new `dir` appears with all of them (temporary name, fsync, rename), so a reader never sees
   * a round's adapter without the state that continues it.
   */
  async saveWithAdapter(dir: string, file: string): Promise<void> {
    return this.native.saveWithAdapter(dir, file);
  }

  async load(path: string): Promise<void> {
    return this.native.load(path);
  }
}

/** One process per rank, rendezvous through a c10d TCPStore; Gloo on CPU, NCCL on CUDA. */
export class ProcessGroup {
  private constructor(readonly native: NativeProcessGroup) {}

  static async init(opts: ProcessGroupOptions): Promise<ProcessGroup> {
    const native = await addon().initProcessGroup(
      opts.backend,
      opts.rank,
      opts.worldSize,
      opts.masterAddr,
      opts.masterPort,
      opts.device,
      opts.timeoutS ?? 600,
    );
    return new ProcessGroup(native);
  }

  get rank(): number {
    return this.native.rank;
  }

  get worldSize(): number {
    return this.native.worldSize;
  }

  async allReduce(data: Float32Array, op: "sum" | "mean"): Promise<Float32Array> {
    return this.native.allReduce(data, op);
  }

  async barrier(): Promise<void> {
    return this.native.barrier();
  }

  async close(): Promise<void> {
    return this.native.close();
  }
}
