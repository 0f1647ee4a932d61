// One job on a loaded model: the recipe for its kind, then the job's adapters and cached vision features are
// dropped so a resident rank can take the next job on the same base model.
import { deviceMemoryStats, resetPeakMemoryStats, type Model } from "../native.js";
import type { ModelSpec, TrainJob } from "../contract/index.js";
import { POLICY, REFERENCE, runPpo, type PpoResult } from "./ppo.js";
import type { ModelAssets } from "./model-assets.js";
import type { RankContext } from "./rank-context.js";
import { runSft, type SftResult } from "./sft.js";

export type TrainResult = SftResult | PpoResult;

/** `assets`: the model's tokenizer and processor files, read once for every job of the process (model-assets.ts). */
export async function runJob(ctx: RankContext, model: Model, assets: ModelAssets, job: TrainJob): Promise<TrainResult> {
  // "job start"/"job done" bracket everything after the model load (adapters, fixed log-probs, training, saving):
  // the span benchmarks compare, with the job's peak GPU memory.
  resetPeakMemoryStats(model.info.device);
  const began = performance.now();
  ctx.log.info({ kind: job.kind }, "job start");
  try {
    const result = job.kind === "sft" ? await runSft(ctx, model, assets, job) : await runPpo(ctx, model, assets, job);
    const peakGpuGiB = deviceMemoryStats(model.info.device).peakAllocatedBytes / 2 ** 30;
    ctx.log.info({ kind: job.kind, seconds: (performance.now() - began) / 1000, peakGpuGiB }, "job done");
    return result;
  } finally {
    for (const name of [POLICY, REFERENCE]) if (model.adapterNames().includes(name)) model.removeAdapter(name);
    await model.clearVisionCache();
  }
}

export async function loadModel(spec: ModelSpec): Promise<Model> {
  const { Model } = await import("../native.js");
  return Model.load(spec.dir, { device: spec.device, dtype: spec.dtype, checkpointing: spec.checkpointing, tf32: spec.tf32, attention: spec.attention });
}
