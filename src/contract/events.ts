// Every event the loop publishes (docs/daemon.md "Events"): rollout rejections, the round lifecycle, adapter
// announcements, the reloader's replica loads, and the periodic stats — each on the subject named after its
// `type` (names.ts). Field names are snake_case on the whole wire, as JetStream's own API and the seed's files are.
import { z } from "zod";
import { FaultKind, HealthStatus, Phase, RejectReason, RemovedFromRound, RoundOutcome, RoundTrigger } from "./enums.js";
import { enumOf, isoTimestamp, nonNegativeInt, sha256Hex, statNumber } from "./primitives.js";
import { PpoStats } from "./stats.js";

const policy = z.string().meta({ description: "the policy" });
const at = isoTimestamp().meta({ description: "when the event was published" });
const round = z.number().int().min(1).meta({ description: "the round" });

/** A rejection's message may quote the rollout (its keys, its values): cut to this length, so that a rollout as large
 *  as the server lets through never makes an event it refuses, and the rejection is recorded. Not enforced on reading:
 *  events recorded before the bound still parse. */
export const MAX_REJECTION_MESSAGE_CHARS = 1000;

/** `message` as a rejection carries it: whole when it fits, else cut (never inside a surrogate pair) and marked. */
export function rejectionMessage(message: string): string {
  if (message.length <= MAX_REJECTION_MESSAGE_CHARS) return message;
  const mark = `… (${message.length} characters)`;
  const cut = message.slice(0, MAX_REJECTION_MESSAGE_CHARS - mark.length);
  return `${/[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut}${mark}`;
}

export const RolloutRejected = z.object({
  type: z.literal("rollout.rejected"),
  policy,
  seq: nonNegativeInt().meta({ description: "stream sequence of the rejected message in RLLOOP_ROLLOUTS" }),
  id: z.string().nullable().meta({ description: "rollout id when the payload had one" }),
  reason: enumOf(RejectReason, "why it was refused"),
  message: z.string().meta({ description: `what exactly is wrong: at most ${MAX_REJECTION_MESSAGE_CHARS} characters, a longer one cut to fit, ending in "… (N characters)"` }),
  round: z.number().int().optional().meta({ description: "the round it belonged to (poison and logp_mismatch only)" }),
  at,
}).meta({ description: "a rollout the daemon refused (rlloop.<policy>.rollout.rejected)" });
export type RolloutRejected = z.infer<typeof RolloutRejected>;

const roundBase = { policy, round, at };
const poisoned = z.object({
  seq: nonNegativeInt(),
  id: z.string(),
  error: z.string().meta({ description: "the trainer's error on this rollout's rows, or its log-prob gap" }),
  reason: enumOf(RemovedFromRound, "why it was taken out").default("poison"),
});

export const RoundEvent = z.discriminatedUnion("type", [
  z.object({ type: z.literal("round.closed"), ...roundBase, trigger: enumOf(RoundTrigger, "what closed it"), rows: nonNegativeInt(), rollouts: nonNegativeInt() }),
  z.object({ type: z.literal("round.assembled"), ...roundBase, rows: nonNegativeInt(), sha256: sha256Hex(), dir: z.string() }),
  z.object({ type: z.literal("round.training"), ...roundBase, attempt: z.number().int().min(1) }),
  z.object({ type: z.literal("round.trained"), ...roundBase, stats: PpoStats }),
  z.object({
    type: z.literal("round.attempt_failed"), ...roundBase, attempt: z.number().int().min(1),
    fault: enumOf(FaultKind, "who the failure is blamed on"), error: z.string().meta({ description: "the trainer's error, first line" }),
  }),
  z.object({
    type: z.literal("round.isolated"), ...roundBase, poisoned: z.array(poisoned).meta({ description: "the rollouts taken out of the round and rejected (poison, logp_mismatch)" }),
    rows: nonNegativeInt().meta({ description: "rows left in the round" }), sha256: sha256Hex().nullable().meta({ description: "the new train.jsonl's sha256 (null when no row is left)" }),
  }),
  z.object({ type: z.literal("round.rejected"), ...roundBase, reason: z.string(), stats: PpoStats.optional() }),
  z.object({ type: z.literal("round.committed"), ...roundBase, outcome: enumOf(RoundOutcome, "the round's outcome"), revision: z.number().int().min(1) }),
  z.object({ type: z.literal("round.published"), ...roundBase, name: z.string() }),
]).meta({ description: "a step of a round's life (rlloop.<policy>.round.<kind>)" });
export type RoundEvent = z.infer<typeof RoundEvent>;
export type RoundEventType = RoundEvent["type"];

export const AdapterFile = z.object({
  name: z.string().meta({ description: "file name inside the adapter dir" }),
  object: z.string().meta({ description: "object name in the rlloop-adapters object store" }),
  sha256: sha256Hex(),
  size: nonNegativeInt(),
});

export const AdapterPublished = z.object({
  type: z.literal("adapter.published"),
  policy,
  round,
  name: z.string().meta({ description: "versioned name to load in vLLM: <policy>-r<round>" }),
  path: z.string().meta({ description: "adapter directory on the daemon's disk" }),
  object: z.string().meta({ description: "object-store prefix <policy>/r<round> in `bucket`" }),
  bucket: z.string(),
  sha256: sha256Hex().meta({ description: "sha256 of adapter_model.safetensors (what a reloader verifies)" }),
  files: z.array(AdapterFile),
  stats: PpoStats,
  parent: nonNegativeInt().optional().meta({ description: "the adapter it continues (its lineage, issue 23)" }),
  at,
}).meta({ description: "a new adapter to serve (rlloop.<policy>.adapter.published)" });
export type AdapterPublished = z.infer<typeof AdapterPublished>;

const replicaBase = { policy, replica: z.string().meta({ description: "the vLLM replica's base URL" }), name: z.string().meta({ description: "the adapter's versioned name" }), at };
export const ReplicaLoaded = z.object({ type: z.literal("replica.loaded"), ...replicaBase });
export const ReplicaLoadFailed = z.object({ type: z.literal("replica.load_failed"), ...replicaBase, reason: z.string() });
export const ReplicaEvent = z.discriminatedUnion("type", [ReplicaLoaded, ReplicaLoadFailed])
  .meta({ description: "the reloader's result for one replica and adapter (rlloop.<policy>.replica.<kind>)" });
export type ReplicaEvent = z.infer<typeof ReplicaEvent>;

export const Health = z.object({
  status: enumOf(HealthStatus, "the daemon's health"),
  cause: z.string().nullable().meta({ description: "why it is degraded (null when ok)" }),
  since: isoTimestamp().nullable().meta({ description: "when it became degraded (null when ok)" }),
});
export type Health = z.infer<typeof Health>;

export const LastRoundStats = z.object({
  round: z.number().int(),
  outcome: enumOf(RoundOutcome, "its outcome"),
  pg_loss: statNumber().nullable(),
  kl: statNumber().nullable(),
  clip_frac: statNumber().nullable(),
  logp_gap: statNumber().nullable(),
  logp_gap_abs: statNumber().nullable(),
});
export type LastRoundStats = z.infer<typeof LastRoundStats>;

/** One adapter's live outcomes (issue 23): the rewards of the committed rollouts it served. */
export const OutcomeSummary = z.object({
  round: nonNegativeInt().meta({ description: "the adapter (the round that produced it)" }),
  parent: nonNegativeInt().nullable().meta({ description: "the adapter it continues" }),
  count: nonNegativeInt().meta({ description: "committed rollouts it served" }),
  mean: z.number().nullable().meta({ description: "their mean episode reward" }),
  sd: z.number().nullable().meta({ description: "their standard deviation (null below 2)" }),
  min: z.number().nullable(),
  max: z.number().nullable(),
  success_rate: z.number().nullable().meta({ description: "fraction with reward >= guard.successThreshold (null without one)" }),
  clipped: nonNegativeInt().meta({ description: "rewards outside guard.rewardRange" }),
  lower: z.number().nullable().meta({ description: "the guard's lower confidence bound of the mean (its baseline level), null without guard.rewardRange" }),
  upper: z.number().nullable().meta({ description: "the guard's upper confidence bound of the mean (its candidate level)" }),
}).meta({ description: "an adapter's live outcomes" });
export type OutcomeSummary = z.infer<typeof OutcomeSummary>;

export const GuardStatus = z.object({
  enabled: z.boolean().meta({ description: "guard.enabled: a regression rolls back" }),
  status: z.enum(["off", "waiting", "ok", "regressed"]).meta({ description: "off: no guard.rewardRange; waiting: too few rollouts to test; ok: no regression shown; regressed: the candidate is worse than `target` (rolled back in the commit that found it, when enabled)" }),
  candidate: nonNegativeInt().nullable().meta({ description: "the adapter under test" }),
  target: nonNegativeInt().nullable().meta({ description: "the better ancestor (regressed only)" }),
  margin: z.number().nullable().meta({ description: "ok: how far the closest test is from rolling back (upper bound of the difference + guard.minEffect; a rollback needs it below 0)" }),
  reason: z.string().nullable(),
  last_rollback: z.object({ seq: z.number().int(), trigger: z.string(), from: nonNegativeInt(), to: nonNegativeInt(), round: nonNegativeInt(), at: isoTimestamp() }).nullable(),
}).meta({ description: "the live-outcome guard" });
export type GuardStatus = z.infer<typeof GuardStatus>;

export const StatsEvent = z.object({
  type: z.literal("stats"),
  policy,
  at,
  phase: enumOf(Phase, "what the daemon is doing"),
  health: Health,
  round: nonNegativeInt().meta({ description: "last committed round" }),
  open_round: z.number().int().min(1).meta({ description: "round the intake buffer will become" }),
  training_round: z.number().int().nullable().meta({ description: "round being trained, null when none" }),
  buffered_rows: nonNegativeInt(),
  buffered_rollouts: nonNegativeInt(),
  rows_per_s: z.number().meta({ description: "intake rate over the last stats interval" }),
  pending_acks: nonNegativeInt().meta({ description: "messages held unacked (open and training rounds)" }),
  rejected: nonNegativeInt().meta({ description: "rollouts rejected since the daemon started" }),
  last: LastRoundStats.nullable(),
  gpu_memory_bytes: z.number().nullable().meta({ description: "peak GPU memory the trainer reported for the last round, null when unknown" }),
  uptime_s: z.number(),
  outcomes: z.array(OutcomeSummary).optional().meta({ description: "live outcomes of the adapters served lately, oldest first (issue 23)" }),
  guard: GuardStatus.optional(),
}).meta({ description: "the daemon's periodic snapshot (rlloop.<policy>.stats, and the svc.status answer)" });
export type StatsEvent = z.infer<typeof StatsEvent>;

export const RoundSummary = z.object({
  round,
  status: z.string().meta({ description: "manifest status, with the outcome once committed (committed:published)" }),
  rows: nonNegativeInt(),
  rollouts: nonNegativeInt(),
  sha256: sha256Hex().meta({ description: "train.jsonl's sha256" }),
  stats: PpoStats.nullable(),
  outcomes: OutcomeSummary.nullable().optional().meta({ description: "live outcomes of the adapter this round produced (null: none published, or no longer kept)" }),
}).meta({ description: "one round in the svc.rounds answer" });
export type RoundSummary = z.infer<typeof RoundSummary>;
