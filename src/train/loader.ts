// Batches for a recipe: collate the rows of a batch (tokens, frames) and move them to the device, one batch ahead
// of the one being trained on, so CPU-side collation overlaps the native module's compute (which runs off the JS
// thread). The seed used DataLoader workers for the same purpose.
import type { Batch, Model, RowInput } from "../native.js";
import type { Collator } from "./collate.js";
import { round2 } from "../phase-clock.js";
import type { SftRow } from "./rows.js";

export interface LoadedBatch<R extends SftRow> {
  rows: R[];
  indices: number[]; // row indices in the data file's order
  batch: Batch;
  inputs: RowInput[];
}

/** Time the consumer spent waiting for a batch that was not ready yet (data loading not hidden by compute), and
 *  where the first batch's preparation went (collating its rows on the JS side, then prepare()'s tensors and upload). */
export interface DataWait {
  ms: number;
  first?: { collateS: number; prepareS: number; collatedEarly: boolean };
  collatedEarly?: number; // how many of the pass's batches came collated already (early-batch.ts)
}

/** The batches of a pass; `firstReady` settles when the first one is prepared (or failed: the failure comes with
 *  the batch, when it is read); `lastTaken` resolves when the last one is handed to the caller, which trains on it
 *  now: the time to start preparing what follows the pass. It never settles for a pass not read to its last batch
 *  (a caller that stops early, a batch that failed): await it only where the pass is read to its end. */
export type PreparedBatches<R extends SftRow> = AsyncGenerator<LoadedBatch<R>> & { firstReady: Promise<void>; lastTaken: Promise<void> };

/** `start()` (a pass's batches) once `after` settles; a caller that fails before reading them leaves nothing
 *  unhandled. */
export function startAfter<T>(after: Promise<void>, start: () => T): Promise<T> {
  const started = after.then(start);
  started.catch(() => undefined);
  return started;
}

/**
 * Yields each group of indices as a prepared batch, preparing the next one while the caller works. The first batch
 * starts preparing at the call, not at the first iteration, so a caller can create the sequence before other setup
 * (loading adapters: prepare() has a thread of its own) and find that batch ready. `early(g, indices)`, where it
 * gives inputs, is group g collated already (early-batch.ts); where it gives null, the group is collated here.
 */
export function preparedBatches<R extends SftRow>(
  model: Model,
  collator: Collator,
  rows: R[],
  groups: number[][],
  source: string,
  wait: DataWait = { ms: 0 },
  early?: (g: number, indices: number[]) => Promise<RowInput[] | null> | null,
): PreparedBatches<R> {
  const load = async (indices: number[], g: number): Promise<LoadedBatch<R>> => {
    const picked = indices.map((i) => rows[i]!);
    const start = performance.now();
    const earlyInputs = (await early?.(g, indices)) ?? null; // (checked against these rows by its giver)
    if (earlyInputs) wait.collatedEarly = (wait.collatedEarly ?? 0) + 1;
    const inputs = earlyInputs ?? (await Promise.all(picked.map((r) => collator.row(r, source))));
    const collated = performance.now();
    const batch = await model.prepare(inputs);
    if (g === 0) {
      const prepareS = round2((performance.now() - collated) / 1000);
      wait.first = { collateS: round2((collated - start) / 1000), prepareS, collatedEarly: earlyInputs !== null };
    }
    return { rows: picked, indices, inputs, batch };
  };
  // A rejected prefetch must not surface as an unhandled rejection while the caller is still busy.
  const prefetch = (g: number): Promise<LoadedBatch<R>> | null => {
    const pending = g < groups.length ? load(groups[g]!, g) : null;
    pending?.catch(() => undefined);
    return pending;
  };
  const first = prefetch(0);
  let lastHandedOut = () => {};
  const lastTaken = new Promise<void>((resolve) => (lastHandedOut = resolve));
  if (groups.length === 0) lastHandedOut();
  const batches = (async function* () {
    let next = first;
    for (let g = 0; g < groups.length; g++) {
      const waitStart = performance.now();
      const current = await next!;
      wait.ms += performance.now() - waitStart;
      next = prefetch(g + 1);
      if (next === null) lastHandedOut();
      yield current;
    }
  })();
  const firstReady = first ? first.then(() => undefined, () => undefined) : Promise.resolve();
  return Object.assign(batches, { firstReady, lastTaken });
}
