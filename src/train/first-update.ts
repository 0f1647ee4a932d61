// A PPO round's first update is on-policy. Until the round's first optimizer step the policy being trained is the
// very policy whose "old" log-probs the ratio divides by, so the rows of that update need no frozen pass under the
// policy: each of their training forwards supplies its own old log-probs, detached (ratio exactly 1, the same
// gradient as a separate no-grad pass would give, up to that pass's rounding). The same holds for the reference when
// it is the policy itself (a loop's first round). At the issue-5 shapes (256 rows, batch 16, accumulation 2) this
// removes one 32-row frozen batch of eight; verl takes the same shortcut for on-policy mini-batches.
// The old log-probs of these rows are filled in after the first update, for the later epochs and the round's
// statistics (logp_gap), so nothing downstream sees a difference. Off with truncated importance sampling
// (--tis-cap): its weights need every row's old log-probs before the first forward.
import { batchesPerEpoch, epochGroups } from "./batching.js";
import type { TrainJob } from "../contract/index.js";
import { sumOverRanks, type RankContext } from "./rank-context.js";

export interface FirstUpdatePlan {
  /** Steps of epoch 1 before the first optimizer step (the same on every rank: ranks read equal row counts). */
  steps: number;
  /** Every on-policy row (all ranks) → the lowest rank that trains it, the one that reports its log-probs. */
  owner: ReadonlyMap<number, number>;
}

/** The first update's rows on every rank, or null when the shortcut does not apply (truncated IS). */
export function planFirstUpdate(rows: number, job: TrainJob, world: number): FirstUpdatePlan | null {
  if (job.tis_cap !== null || rows === 0) return null;
  const steps = Math.min(job.accumulation, batchesPerEpoch(rows, world, job.batch));
  const owner = new Map<number, number>();
  // Highest rank first, so that a row two ranks train (DistributedSampler's padding) ends up owned by the lowest.
  for (let rank = world - 1; rank >= 0; rank--) {
    for (const group of epochGroups(rows, job, 0, rank, world).slice(0, steps)) for (const row of group) owner.set(row, rank);
  }
  return { steps, owner };
}

/** Code-token log-probs of the round's rows under the policy (old) and the reference, [rows × n] row-major. */
export interface RoundLogprobs {
  old: Float32Array;
  ref: Float32Array;
  n: number;
}

/** Collects the first update's own log-probs on one rank and completes the round's old (and ref) log-probs. */
export class FirstUpdateRun {
  private readonly reported: Float32Array;

  constructor(
    private readonly plan: FirstUpdatePlan,
    private readonly rank: number,
    private readonly fixed: RoundLogprobs,
    /** The reference is the policy: its log-probs of these rows are the same forward's. */
    readonly refIsPolicy: boolean,
  ) {
    this.reported = new Float32Array(fixed.old.length);
  }

  /** Whether step `step` (0-based) of epoch `epoch` (0-based) is on-policy. */
  covers(epoch: number, step: number): boolean {
    return epoch === 0 && step < this.plan.steps;
  }

  /** Keeps the code-token log-probs (the first n of each row's K) of the rows this rank reports. */
  record(indices: number[], logp: Float32Array): void {
    const { n } = this.fixed;
    const K = logp.length / indices.length;
    indices.forEach((row, i) => {
      if (this.plan.owner.get(row) === this.rank) this.reported.set(logp.subarray(i * K, i * K + n), row * n);
    });
  }

  /** After the first optimizer step, on every rank: the on-policy rows' log-probs summed over ranks, written in. */
  async complete(ctx: RankContext): Promise<void> {
    const all = await sumOverRanks(ctx, this.reported);
    const { n, old, ref } = this.fixed;
    for (const row of this.plan.owner.keys()) {
      const values = all.subarray(row * n, (row + 1) * n);
      old.set(values, row * n);
      if (this.refIsPolicy) ref.set(values, row * n);
    }
  }
}
