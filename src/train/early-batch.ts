// The frozen pass's first two batches of a one-shot PPO job on one rank, collated while the model loads. Such a run
// knows its job before the load. Collating the pass's first batch (its rows tokenized, its frames decoded and
// preprocessed) would otherwise start with the job, and the frozen pass would wait for it (0.09-0.13 s in eight of
// nine one-shot rounds of bench/RESULTS.md's H200 section, of which 0.07-0.10 s collating); its second batch (twice as
// many rows) would be collated while the first computes, sharing libuv's threads with the first epoch's first batch,
// which starts collating then too. The rows are the ones the job asks for first: read, planned (first-update.ts) and
// ordered (frozen-pass.ts) as the job does, on its one rank. The job takes a batch only if its own collator would make
// the same inputs (takeEarlyBatch): the same rows at the same places, the same text, the same frame files. Every frame
// goes with its pixels, as the job's first collation sends them (its CachedFrames holds no grid yet); where the
// second batch repeats a frame of the first, the job's own collation might have sent only its key, had the first
// batch's forward cached its features by then; the forward takes cached features either way (the model decides
// from its cache when a batch runs), so the values are the same.
import type { RowInput } from "../native.js";
import type { TrainJob } from "../contract/index.js";
import { sameAdapter } from "./adapter-identity.js";
import { CachedFrames } from "./cached-frames.js";
import { loadJobCollator, type Collator } from "./collate.js";
import { planFirstUpdate } from "./first-update.js";
import { frozenPassPlan } from "./frozen-pass.js";
import type { ModelAssets } from "./model-assets.js";
import { readRows, type SftRow } from "./rows.js";

export interface EarlyBatch {
  indices: number[]; // row indices in the data file's order
  texts: string[]; // each row's text as the collator renders it (prompt, code)
  inputs: RowInput[];
}

/** The early batches of a job, each a promise of its own (collateFirstFrozenBatches); null for a job without any. */
export type EarlyBatches = Promise<Promise<EarlyBatch>[] | null>;

/** How many of the frozen pass's batches are collated beside the load: its first (`batch` rows) and its second. */
export const EARLY_BATCHES = 2;

/**
 * The frozen pass's first EARLY_BATCHES batches of `job` (a PPO job on one rank), each being collated, one after the
 * other in the pass's order (the first is the one the job waits for first); null for any other job. A batch whose
 * collation fails rejects alone, the whole when the rows cannot be read: the caller's to ignore (the job then
 * collates those rows itself and reports what is wrong with them).
 */
export async function collateFirstFrozenBatches(assets: ModelAssets, job: TrainJob): EarlyBatches {
  if (job.kind !== "ppo") return null;
  const rows = await readRows(job.data, "ppo", "--data", job.image_base);
  const refIsPolicy = await sameAdapter(job.adapter!, job.ref!);
  const { groups } = frozenPassPlan(rows.length, 0, 1, job.batch, planFirstUpdate(rows.length, job, 1), refIsPolicy);
  const collator = await loadJobCollator(assets, job, new CachedFrames({ visionCached: () => false }));
  let previous: Promise<unknown> = Promise.resolve();
  return groups.slice(0, EARLY_BATCHES).map((indices) => {
    const picked = indices.map((i) => rows[i]!);
    const batch = previous.then(async () => ({
      indices,
      texts: picked.map((row) => collator.text(row)),
      inputs: await Promise.all(picked.map((row) => collator.row(row, job.data))),
    }));
    previous = batch.catch(() => undefined); // (and `batch` handled: read by takeEarlyBatch, if the job gets that far)
    return batch;
  });
}

/**
 * The early batch's inputs for the job's frozen group `group` of `rows` (the batch collated for that place in the
 * pass), or null (the job collates the group itself): when the collation failed, or its rows, their texts under the
 * job's `collator` or their frame files (the cache key: path, inode, size, times) are not the job's. Taken, its
 * frames' grids go to the job's `frames`, as the job's own collation would have left them, so that later batches send
 * those frames without pixels once the model holds their features. The batch gives its inputs up either way (they
 * leave `batch.inputs`): their pixels (~7 MB a 640x480 frame) then live as long as the job's batch, not as long as
 * whoever holds `early`. Never rejects: a row that no longer renders (the file changed since) is a mismatch too.
 */
export async function takeEarlyBatch(
  early: Promise<EarlyBatch | null>,
  group: number[],
  rows: SftRow[],
  collator: Collator,
  frames: CachedFrames,
): Promise<RowInput[] | null> {
  const batch = await early.catch(() => null);
  const inputs = batch?.inputs.splice(0) ?? [];
  if (!batch || batch.indices.length !== group.length || inputs.length !== group.length) return null;
  const matches = await Promise.all(
    group.map(async (row, i) => {
      const image = inputs[i]!.images[0];
      return batch.indices[i] === row && batch.texts[i] === renders(collator, rows[row]!) &&
        image?.cacheKey !== undefined && image.cacheKey === (await frames.key(rows[row]!.image));
    }),
  );
  if (!matches.every(Boolean)) return null;
  for (const input of inputs) for (const image of input.images) if (image.cacheKey !== undefined) frames.remember(image.cacheKey, image.grid);
  return inputs;
}

/** The row's text under `collator`, or null where it does not render (the job's own collation reports why). */
function renders(collator: Collator, row: SftRow): string | null {
  try {
    return collator.text(row);
  } catch {
    return null;
  }
}
