// One job on a loaded model: the recipe for its kind, then the job's adapters and cached vision features are
// dropped so a resident rank can take the next job on the same base model.
import { deviceMemoryStats, resetPeakMemoryStats, type Model } from "../native.js";
import type { Logger } from "pino";
import type { ModelSpec, TrainJob } from "../contract/index.js";
import { POLICY, REFERENCE, runPpo, type PpoResult } from "./ppo.js";
import type { ModelAssets } from "./model-assets.js";
import type { RankContext } from "./rank-context.js";
import { secondsSince } from "./progress.js";
import { runSft, type SftResult } from "./sft.js";
import { loadStandIn, warmsUp, warmUp } from "./warm-up.js";
import { collateFirstFrozenBatches, type EarlyBatches } from "./early-batch.js";

export type TrainResult = SftResult | PpoResult;

/** `assets`: the model's tokenizer and processor files, read once for every job of the process (model-assets.ts). */
export async function runJob(
  ctx: RankContext,
  model: Model,
  assets: ModelAssets,
  job: TrainJob,
  early?: EarlyBatches,
): Promise<TrainResult> {
  // "job start"/"job done" bracket everything after the model load (adapters, fixed log-probs, training, saving):
  // the span benchmarks compare, with the job's peak GPU memory.
  resetPeakMemoryStats(model.info.device);
  const began = performance.now();
  ctx.log.info({ kind: job.kind }, "job start");
  try {
    const result = job.kind === "sft" ? await runSft(ctx, model, assets, job) : await runPpo(ctx, model, assets, job, early);
    const peakGpuGiB = deviceMemoryStats(model.info.device).peakAllocatedBytes / 2 ** 30;
    ctx.log.info({ kind: job.kind, seconds: (performance.now() - began) / 1000, peakGpuGiB }, "job done");
    return result;
  } finally {
    for (const name of [POLICY, REFERENCE]) if (model.adapterNames().includes(name)) model.removeAdapter(name);
    await model.clearVisionCache();
  }
}

/**
 * The base model of a process, and its assets read while its weights load: Model.load runs on the native module's
 * thread, and building the tokenizer blocks the JS thread (~1 s with Qwen3.5's vocabulary), so the first job does
 * not pay for it after the load, just as the seed reads its processor before loading its model. A failed read is
 * not kept (load-once.ts): the first job reads again and reports its own error, as it would have without this.
 * With `oneShot` (a one-shot run, whose job is known before the load) on CUDA, that job's first batch also runs on a
 * stand-in model beside the load (warm-up.ts), and the model is returned once the stand-in is closed. A load that
 * ran out of device memory beside the stand-in (a checkpoint that fits the device with little to spare) is made
 * again without it. With `oneShot`, a PPO job's first two frozen batches (EARLY_BATCHES) are also collated beside
 * the load, whatever the device and RLLOOP_WARM_UP (early-batch.ts), for runJob's `early`.
 */
export async function loadModelWithAssets(
  spec: ModelSpec,
  oneShot?: { job: TrainJob; log: Logger },
): Promise<{ model: Model; assets: ModelAssets; early?: EarlyBatches }> {
  const { Model } = await import("../native.js");
  const withStandIn = oneShot !== undefined && warmsUp(spec);
  const start = performance.now();
  const { dir, ...options } = spec; // a ModelSpec is the folder and Model.load's options
  const load = () => Model.load(dir, options);
  const loading = load();
  loading.catch(() => undefined); // awaited below; a load that fails meanwhile is not an unhandled rejection
  const standIn = withStandIn ? loadStandIn(spec) : null; // beside it, on a thread of its own
  const { ModelAssets } = await import("./model-assets.js"); // the tokenizers binding: loaded beside the weights too
  const assets = new ModelAssets(dir);
  const warming = standIn && warmUp(standIn, assets, oneShot!.job, oneShot!.log);
  await assets.collator().catch(() => undefined);
  if (!oneShot) return { model: await loading, assets };
  // after the stand-in's load, by when the warm-up has collated its own first batch: the two would share the JS
  // thread and libuv's pool, and the warm-up is what a page-cached load waits for
  const standInSettled = standIn ? standIn.then(() => undefined, () => undefined) : Promise.resolve();
  const early = standInSettled.then(() => collateFirstFrozenBatches(assets, oneShot.job));
  early.catch(() => undefined); // the job collates the batches itself then, and reports what is wrong with its rows
  const model = await loading.catch(async (error: unknown) => {
    await warming;
    if (!warming || (error as { code?: unknown }).code !== "ERR_RLLOOP_OOM") throw error;
    oneShot.log.warn({ err: error }, "the model's load ran out of device memory beside the warm-up's stand-in; loading it again alone");
    return load();
  });
  const loadS = secondsSince(start);
  await warming; // (its GPU work would otherwise run inside the job's)
  oneShot.log.info({ loadS, readyS: secondsSince(start), warmUp: warming !== null }, "model loaded");
  return { model, assets, early };
}
