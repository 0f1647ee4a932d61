// The enumerations of the wire, each defined once: a code → meaning table (`as const`) and the derived union type.
// Codes are stable (dashboards count them); meanings are documentation.

/** Why a rollout was refused. The rejection event's `message` names the detail. */
export const RejectReason = {
  too_large: "payload exceeds limits.maxPayloadBytes",
  too_deep: "JSON nests deeper than limits.maxDepth",
  invalid_json: "payload is not valid UTF-8 JSON",
  invalid_schema: "payload does not match RolloutCompleted",
  string_too_long: "a string field exceeds its length limit",
  meta_too_large: "unknown fields (kept as meta) exceed limits.maxMetaBytes",
  unknown_policy: "event policy does not match the subject's policy",
  code_length: "code has the wrong number of digits",
  too_many_steps: "more steps than policy.maxSteps",
  non_finite_reward: "reward is not a finite number",
  non_finite_logp: "vllm_logp is not a finite number",
  reward_out_of_range: "a reward is outside limits.reward",
  logp_out_of_range: "vllm_logp is below limits.minLogp",
  image_missing: "frame file or object not found",
  image_unreadable: "frame file exists but cannot be read",
  image_corrupt: "frame cannot be decoded",
  image_format: "frame is not PNG, JPEG or WebP",
  image_too_large: "frame exceeds frames.maxBytes or frames.maxPixels",
  image_shape: "frame's aspect ratio is over 200:1, beyond the model's image processor",
  image_outside_roots: "frame path is outside frames.roots",
  stale_adapter: "served by an adapter more than offPolicy.maxStaleness adapters behind when it reached the stream",
  unknown_adapter: "served by an adapter round the loop has not published",
  adapter_mismatch: "adapter sha256 differs from the published one",
  duplicate_id: "a rollout with this id was already consumed, or another copy of it is in a round this one cannot wait for (the rollouts waiting fill their room, or it would leave the stream or the id memory first)",
  unjudgeable: "judging it failed with an error that is not a transient I/O or NATS failure",
  undeliverable: "its judgement kept failing (NATS, the host, the configuration) after more than intake.maxDeliveries deliveries while the rollouts waiting held the stream, or until it would have left the stream (stream.maxAgeS)",
  poison: "training failed on this rollout's rows while the rest of its round trained",
  logp_mismatch: "the trainer's log-prob of its codes differs from its vllm_logp by more than gate.maxRolloutLogpGapAbs (mean over its steps of |Σ old - vllm_logp|) while at least half of its round's rollouts agree",
} as const;
export type RejectReason = keyof typeof RejectReason;

/** Why a rollout was taken out of a round after it closed (the reasons a manifest's `poisoned` records). */
export const RemovedFromRound = { poison: RejectReason.poison, logp_mismatch: RejectReason.logp_mismatch } as const;
export type RemovedFromRound = keyof typeof RemovedFromRound;

/** What closed a round. */
export const RoundTrigger = {
  rows: "round.rows reached",
  groups: "round.groups reached",
  max_wait: "round.maxWaitS passed",
} as const;
export type RoundTrigger = keyof typeof RoundTrigger;

/** Final outcome of a committed round. */
export const RoundOutcome = {
  published: "adapter passed the health gate and was published",
  rejected: "adapter failed the health gate; parent adapter kept, rollouts consumed",
  empty: "every rollout of the round was taken out (poison, logp_mismatch); nothing trained, parent adapter kept",
} as const;
export type RoundOutcome = keyof typeof RoundOutcome;

/** Outcome of the state record: a round's, or `initial` before the first round. */
export const StateOutcome = { initial: "no round committed yet", ...RoundOutcome } as const;
export type StateOutcome = keyof typeof StateOutcome;

/** Where a round folder is in its life (manifest.json `status`). */
export const ManifestStatus = {
  assembled: "train.jsonl and frames written; not trained",
  training: "handed to the trainer (attempts counted in `attempts`)",
  committed: "state record moved to this round; see `outcome`",
} as const;
export type ManifestStatus = keyof typeof ManifestStatus;

/** Advantage estimators (DESIGN.md data flow step 3). */
export const AdvantageEstimator = {
  grpo: "per group (R - mean) / (std + eps); groups of one fall back to the batch",
  rloo: "leave-one-out mean baseline within the group",
  return: "per-step discounted return-to-go, batch-normalised",
} as const;
export type AdvantageEstimator = keyof typeof AdvantageEstimator;

/** What the daemon is doing. */
export const Phase = {
  starting: "checking the configuration, starting the trainer, connecting, recovering state",
  intake: "buffering rollouts into the open round",
  assembling: "writing the round folder",
  training: "the trainer runs the round",
  isolating: "training parts of a failed round to find the rollouts it fails on",
  waiting: "the trainer or its host failed; waiting to retry the round (health is degraded)",
  committing: "compare-and-set of the state record",
  publishing: "putting the adapter into the object store and announcing it",
  draining: "SIGTERM received, finishing the current step",
  stopped: "stopped",
} as const;
export type Phase = keyof typeof Phase;

/** The daemon's health. */
export const HealthStatus = {
  ok: "rounds train",
  degraded: "the trainer or its host fails (the cause says how); rounds are kept and retried, no rollout is rejected for it",
} as const;
export type HealthStatus = keyof typeof HealthStatus;

/** Who a failed training attempt was blamed on, from the evidence of a probe job (docs/daemon.md). */
export const FaultKind = {
  trainer: "the probe job failed too: the trainer, its host or the configuration is at fault",
  data: "the probe passed: the round's rows are suspect and are isolated",
  undecided: "the probe could not run (the daemon is stopping)",
} as const;
export type FaultKind = keyof typeof FaultKind;
