// The frozen pass's first batch of a one-shot PPO job, collated while the model loads. A one-shot run knows its job
// before the load, and collating that batch (its rows tokenized, its frames decoded and preprocessed: 0.07-0.10 s
// for 16 rows of 640x480 frames on the GPU machine) would otherwise start with the job, and the frozen pass would
// wait for it (0.11-0.12 s of `dataWaitS` in the one-shot rounds of bench/RESULTS.md). The rows are the ones the job
// will ask for: read, planned (first-update.ts) and ordered (frozen-pass.ts) as the job does, on its one rank. The
// inputs are what the job's collator makes of them at its start, when the freshly loaded model holds no vision
// features: every frame with its pixels and its cache key.
import type { RowInput } from "../native.js";
import type { TrainJob } from "../contract/index.js";
import { sameAdapter } from "./adapter-identity.js";
import { CachedFrames } from "./cached-frames.js";
import { loadCollator } from "./collate.js";
import { planFirstUpdate } from "./first-update.js";
import { frozenPassPlan } from "./frozen-pass.js";
import type { ModelAssets } from "./model-assets.js";
import { loadPrompt } from "./prompt.js";
import { readRows } from "./rows.js";

export interface EarlyBatch {
  indices: number[]; // row indices in the data file's order
  inputs: RowInput[];
}

/** The first frozen batch of `job` (a PPO job on one rank), collated; null for any other job. A failure is the
 *  caller's to ignore: the job then collates the batch itself and reports what is wrong with its rows. */
export async function collateFirstFrozenBatch(assets: ModelAssets, job: TrainJob): Promise<EarlyBatch | null> {
  if (job.kind !== "ppo") return null;
  const rows = await readRows(job.data, "ppo", "--data", job.image_base);
  const refIsPolicy = await sameAdapter(job.adapter!, job.ref!);
  const { groups } = frozenPassPlan(rows.length, 0, 1, job.batch, planFirstUpdate(rows.length, job, 1), refIsPolicy);
  const indices = groups[0];
  if (!indices) return null;
  const frames = new CachedFrames({ visionCached: () => false });
  const collator = await loadCollator(assets, await loadPrompt(job.prompt ?? undefined), frames);
  return { indices, inputs: await Promise.all(indices.map((i) => collator.row(rows[i]!, job.data))) };
}

/** `early`, its frames' grids remembered by the job's `frames` as the job's own collation would have: a later batch
 *  then sends such a frame without its pixels once the model holds its features. A failed collation is null. */
export function adoptFrames(early: Promise<EarlyBatch | null>, frames: CachedFrames): Promise<EarlyBatch | null> {
  return early.then(
    (batch) => {
      for (const input of batch?.inputs ?? []) {
        for (const image of input.images) if (image.cacheKey !== undefined) frames.remember(image.cacheKey, image.grid);
      }
      return batch;
    },
    () => null,
  );
}
