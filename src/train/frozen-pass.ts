// Which rows the PPO frozen pass (ppo.ts) runs in which batch: pure, so that a one-shot run can collate the pass's
// first batch while its model loads (early-batch.ts) and find the rows the job will ask for.
import { batches, strided } from "./batching.js";
import type { FirstUpdatePlan } from "./first-update.js";

/** The frozen pass's groups of row indices on `rank` (`batch` rows, then 2·batch each), and which rows are the
 *  first update's (first-update.ts: they skip the policy's pass). */
export function frozenPassPlan(
  rowCount: number,
  rank: number,
  world: number,
  batch: number,
  firstUpdate: FirstUpdatePlan | null,
  refIsPolicy: boolean,
): { groups: number[][]; onPolicy: (row: number) => boolean; onPolicyRows: number } {
  const mine = strided(Array.from({ length: rowCount }, (_, i) => i), rank, world);
  const onPolicy = (row: number) => firstUpdate?.owner.has(row) ?? false;
  const later = mine.filter((row) => !onPolicy(row));
  // With the reference its own adapter every row needs its pass: the first update's rows go first, so that whole
  // batches of them skip the policy's.
  const order = refIsPolicy ? later : mine.filter(onPolicy).concat(later);
  return { groups: frozenGroups(order, batch), onPolicy, onPolicyRows: mine.length - later.length };
}

/**
 * The frozen pass in batches of twice the training batch (no gradients: the memory allows it, and the GPU runs
 * fuller), except the first, of `batch` rows: the GPU waits for the first batch's frames to be decoded,
 * preprocessed and uploaded, and half as many are ready in about half the time. The batches' composition leaves
 * each row's log-probs unchanged up to bf16 rounding (padding to another length).
 */
function frozenGroups(order: number[], batch: number): number[][] {
  return order.length <= batch ? batches(order, batch) : [order.slice(0, batch), ...batches(order.slice(batch), 2 * batch)];
}
