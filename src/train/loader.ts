// Batches for a recipe: collate the rows of a batch (tokens, frames) and move them to the device, one batch ahead
// of the one being trained on, so CPU-side collation overlaps the native module's compute (which runs off the JS
// thread). The seed used DataLoader workers for the same purpose.
import type { Batch, Model, RowInput } from "../native.js";
import type { Collator } from "./collate.js";
import type { SftRow } from "./rows.js";

export interface LoadedBatch<R extends SftRow> {
  rows: R[];
  indices: number[]; // row indices in the data file's order
  batch: Batch;
  inputs: RowInput[];
}

/** Time the consumer spent waiting for a batch that was not ready yet (data loading not hidden by compute). */
export interface DataWait {
  ms: number;
}

/** Yields each group of indices as a prepared batch, preparing the next one while the caller works. */
export async function* preparedBatches<R extends SftRow>(
  model: Model,
  collator: Collator,
  rows: R[],
  groups: number[][],
  source: string,
  wait: DataWait = { ms: 0 },
): AsyncGenerator<LoadedBatch<R>> {
  const load = async (indices: number[]): Promise<LoadedBatch<R>> => {
    const picked = indices.map((i) => rows[i]!);
    const inputs = await Promise.all(picked.map((r) => collator.row(r, source)));
    return { rows: picked, indices, inputs, batch: await model.prepare(inputs) };
  };
  let next = groups.length > 0 ? load(groups[0]!) : null;
  for (let g = 0; g < groups.length; g++) {
    const waitStart = performance.now();
    const current = await next!;
    wait.ms += performance.now() - waitStart;
    next = g + 1 < groups.length ? load(groups[g + 1]!) : null;
    // A rejected prefetch must not surface as an unhandled rejection while the caller is still busy.
    next?.catch(() => undefined);
    yield current;
  }
}
