// Live outcomes (issue 23): how each adapter does on the robots, from the rewards of the rollouts it served, kept in
// the state record (moved by the round's compare-and-set, so a rollout counts exactly once, when the round that
// consumes it commits), the lineage of adapters the daemon can roll back to, and the rollback record and its
// announcement on rlloop.<policy>.adapter.rolled_back. The statistics are src/loop/live-outcomes.ts and guard.ts.
import { z } from "zod";
import { AdapterFile } from "./events.js";
import { enumOf, isoTimestamp, nonNegativeInt, sha256Hex } from "./primitives.js";
import { StoredFolder } from "./stored-folder.js";

/** Running sums of one anytime-valid confidence sequence (src/loop/confidence-sequence.ts), on values in [0, 1]. */
export const ConfidenceSums = z.object({
  t: nonNegativeInt(),
  sum_x: z.number(),
  sum_sq_dev: z.number(),
  sum_lambda: z.number(),
  sum_lambda_x: z.number(),
  sum_v_psi: z.number(),
}).meta({ description: "running sums of an empirical-Bernstein confidence sequence (src/loop/confidence-sequence.ts)" });

export const AdapterOutcome = z.object({
  round: nonNegativeInt().meta({ description: "the adapter (the round that produced it; 0 = the initial adapter)" }),
  parent: nonNegativeInt().nullable().meta({ description: "the adapter it continues (its lineage); null for the initial one" }),
  count: nonNegativeInt().meta({ description: "committed rollouts it served" }),
  mean: z.number().meta({ description: "their mean episode reward" }),
  m2: z.number().meta({ description: "Σ (reward − mean)² (Welford), for the spread" }),
  min: z.number().nullable(),
  max: z.number().nullable(),
  successes: nonNegativeInt().nullable().meta({ description: "rollouts with reward ≥ guard.successThreshold; null when no threshold is configured" }),
  clipped: nonNegativeInt().meta({ description: "rewards outside guard.rewardRange, counted at the nearest bound by the guard's statistics" }),
  cs: ConfidenceSums.nullable().meta({ description: "the guard's confidence sequence on its rewards scaled from guard.rewardRange to [0, 1]; null without a range" }),
  groups: z.array(z.tuple([z.string(), nonNegativeInt(), z.number(), nonNegativeInt()]))
    .meta({ description: "[group key (sha256 prefix), rollouts, Σ scaled reward, bit j set = paired with its j-th ancestor] of its latest groups, for paired comparisons" }),
  pairs: z.array(z.object({ baseline: nonNegativeInt(), cs: ConfidenceSums }))
    .meta({ description: "paired confidence sequences of (this − ancestor) per-group mean differences, by ancestor round" }),
}).meta({ description: "one adapter's live outcomes" });
export type AdapterOutcome = z.infer<typeof AdapterOutcome>;

export const LiveOutcomes = z.object({
  range: z.object({ min: z.number(), max: z.number() }).nullable().meta({ description: "guard.rewardRange the confidence sequences were built on (a change restarts them)" }),
  adapters: z.array(AdapterOutcome).meta({ description: "the adapters that served committed rollouts, oldest first (the last ones kept)" }),
}).meta({ description: "live outcomes per serving adapter" });
export type LiveOutcomes = z.infer<typeof LiveOutcomes>;

/** An adapter the loop can go back to: its parent and, stored before the commit that made it, its continuation. */
export const LineageEntry = z.object({
  round: nonNegativeInt(),
  parent: nonNegativeInt().nullable(),
  path: z.string().meta({ description: "its folder on the disk of the daemon that committed the record" }),
  sha256: sha256Hex().nullable(),
  objects: StoredFolder.optional(),
}).meta({ description: "a published adapter of the recent lineage, with the objects that continue it (adapter and optimizer state)" });
export type LineageEntry = z.infer<typeof LineageEntry>;

/** Who asked for a rollback. */
export const RollbackTrigger = {
  guard: "the live-outcome guard found the serving lineage worse on the robots than an earlier adapter",
  manual: "an operator asked for it (rlloop rollback --to-round N)",
} as const;
export type RollbackTrigger = keyof typeof RollbackTrigger;

const side = z.object({
  round: nonNegativeInt(),
  count: nonNegativeInt().meta({ description: "its committed rollouts" }),
  mean: z.number().meta({ description: "their mean reward" }),
  bound: z.number().meta({ description: "the confidence-sequence bound used, in reward units (upper for the candidate, lower for the baseline)" }),
});

export const GuardEvidence = z.object({
  test: z.enum(["unpaired", "paired"]).meta({ description: "unpaired: the candidate's upper bound below the baseline's lower bound minus the effect; paired: the upper bound of the per-group differences below minus the effect" }),
  alpha: z.number().meta({ description: "guard.alpha: the false-rollback rate the decision holds to" }),
  min_effect: z.number().meta({ description: "guard.minEffect, reward units" }),
  candidate: side.meta({ description: "the adapter found worse" }),
  baseline: side.meta({ description: "the earlier adapter found better (the rollback target)" }),
  pairs: nonNegativeInt().nullable().meta({ description: "groups compared pairwise (paired test)" }),
  difference_upper: z.number().meta({ description: "upper confidence bound of candidate − baseline mean reward; a rollback needs it below −min_effect" }),
}).meta({ description: "why the guard rolled back" });
export type GuardEvidence = z.infer<typeof GuardEvidence>;

export const RollbackRecord = z.object({
  seq: z.number().int().min(1).meta({ description: "rollbacks so far for this policy; the announcement's message id" }),
  trigger: enumOf(RollbackTrigger, "who asked"),
  from: nonNegativeInt().meta({ description: "the adapter served before" }),
  to: nonNegativeInt().meta({ description: "the adapter served and continued from now" }),
  regressed: nonNegativeInt().nullable().meta({ description: "the adapter the guard found worse (null: manual)" }),
  reason: z.string(),
  evidence: GuardEvidence.nullable(),
  round: nonNegativeInt().meta({ description: "the committed round when it happened" }),
  at: isoTimestamp(),
}).meta({ description: "the last rollback" });
export type RollbackRecord = z.infer<typeof RollbackRecord>;

export const AdapterRolledBack = z.object({
  type: z.literal("adapter.rolled_back"),
  policy: z.string(),
  seq: z.number().int().min(1).meta({ description: "rollback number (RollbackRecord.seq)" }),
  trigger: enumOf(RollbackTrigger, "who asked"),
  round: nonNegativeInt().meta({ description: "the adapter to serve now (the rollback target)" }),
  name: z.string().meta({ description: "its versioned name <policy>-r<round>, as it was published" }),
  object: z.string().meta({ description: "object-store prefix <policy>/r<round> in `bucket`" }),
  bucket: z.string(),
  sha256: sha256Hex().meta({ description: "sha256 of adapter_model.safetensors" }),
  files: z.array(AdapterFile),
  from: z.object({ round: nonNegativeInt(), name: z.string() }).meta({ description: "the adapter served before" }),
  regressed: nonNegativeInt().nullable().meta({ description: "the adapter the guard found worse (null: manual)" }),
  reason: z.string(),
  evidence: GuardEvidence.nullable(),
  committed_round: nonNegativeInt().meta({ description: "the committed round when it happened; the next round continues the target" }),
  at: isoTimestamp(),
}).meta({ description: "serve an earlier adapter again (rlloop.<policy>.adapter.rolled_back)" });
export type AdapterRolledBack = z.infer<typeof AdapterRolledBack>;
