// The wire contract of the loop: NATS names (stream, subjects, buckets) and the zod schemas of every event the
// daemon reads or writes. Shared by the daemon, `rlloop simulate`, `rlloop reload` and `rlloop watch`.
// Holds no behaviour beyond validation; the reject-reason mapping of zod issues lives in src/loop/validate.ts.
import { z } from "zod";

// ---------------------------------------------------------------------------------------------------------------
// Names

/** JetStream stream holding the rollouts of every policy (`rlloop.*.rollouts`), retained by limits for replay. */
export const ROLLOUT_STREAM = "RLLOOP_ROLLOUTS";
/** JetStream stream holding the durable daemon events: rejections, round lifecycle, adapter announcements. */
export const EVENT_STREAM = "RLLOOP_EVENTS";
/** KV bucket of the committed loop state, one key per policy. */
export const STATE_BUCKET = "rlloop";
/** Object store of published adapters, objects named `<policy>/r<round>/<file>`. */
export const ADAPTER_BUCKET = "rlloop-adapters";
/** Name of the NATS micro service (PING/INFO/STATS discovery plus `status` and `rounds` endpoints). */
export const SERVICE_NAME = "rlloop";

/** A policy name is one NATS subject token and one KV key: letters, digits, `_` and `-`. */
export const POLICY_NAME = /^[A-Za-z0-9_-]{1,64}$/;

export function assertPolicyName(policy: string): void {
  if (!POLICY_NAME.test(policy)) {
    throw new TypeError(`policy name must match ${POLICY_NAME}, got ${JSON.stringify(policy)}`);
  }
}

/** Every subject of one policy. `reloads` carries the reloader's adapter.loaded / adapter.load_failed events so
 *  that `adapters` holds announcements only (the daemon's publish-once check reads its last message). */
export function subjects(policy: string) {
  assertPolicyName(policy);
  const base = `rlloop.${policy}`;
  return {
    rollouts: `${base}.rollouts`,
    rejected: `${base}.rejected`,
    adapters: `${base}.adapters`,
    reloads: `${base}.reloads`,
    rounds: `${base}.rounds`,
    stats: `${base}.stats`,
    /** micro service endpoints (request/reply) */
    status: `${base}.svc.status`,
    roundsQuery: `${base}.svc.rounds`,
  } as const;
}

/** Subjects captured by the two streams, for all policies. */
export const ROLLOUT_STREAM_SUBJECTS = ["rlloop.*.rollouts"] as const;
export const EVENT_STREAM_SUBJECTS = ["rlloop.*.rejected", "rlloop.*.adapters", "rlloop.*.reloads", "rlloop.*.rounds"] as const;

/** KV key of a policy's state record. */
export const stateKey = (policy: string): string => policy;
/** Versioned adapter name vLLM serves: `<policy>-r<round>` (never loaded in place). */
export const adapterName = (policy: string, round: number): string => `${policy}-r${round}`;
/** Object-store prefix of a round's adapter; files are `<prefix>/adapter_config.json` etc. */
export const adapterObjectPrefix = (policy: string, round: number): string => `${policy}/r${round}`;
/** Durable consumer name of the daemon for a policy. */
export const consumerName = (policy: string): string => `rlloop-${policy}`;

/** Nats-Msg-Id of daemon-published events, so a restart that repeats a step publishes nothing twice. */
export const msgIds = {
  rejected: (policy: string, seq: number) => `${policy}.rejected.${seq}`,
  adapter: (policy: string, round: number) => `${policy}.adapter.r${round}`,
  round: (policy: string, round: number, type: string) => `${policy}.${type}.r${round}`,
};

// ---------------------------------------------------------------------------------------------------------------
// RolloutCompleted (rollout workers → daemon)

/** Finite number; zod 4's z.number() already refuses ±Infinity and NaN, the message says so. */
const finite = () => z.number({ error: "must be a finite number" });

/** A frame: a file under a configured frame root, an object in the frames object store, or inline base64
 *  (PNG, JPEG or WebP bytes despite the field name, which follows the common case). */
export const ImageRef = z.union([
  z.strictObject({ path: z.string().min(1) }),
  z.strictObject({ object: z.string().min(1) }),
  z.strictObject({ png_base64: z.string().min(1) }),
], { error: "must be exactly one of {path}, {object}, {png_base64}" });
export type ImageRef = z.infer<typeof ImageRef>;

/** Memory bits of a decision's prompt: two strings of 0/1. */
const Bits = z.string().regex(/^[01]*$/, { error: "must be a string of 0/1" });

export const RolloutStep = z.strictObject({
  image: ImageRef,
  /** target name the prompt names */
  name: z.string().min(1),
  /** the sampled behaviour code, one digit per FSQ dimension; its length is checked against policy.codeLength */
  code: z.string().regex(/^[0-9]+$/, { error: "must be a string of digits" }),
  /** vLLM's summed log-prob of the code tokens under the serving adapter */
  vllm_logp: finite().max(0, { error: "must be <= 0 (a log-probability)" }),
  /** the two memory strings of the prompt, when the rollout ran with memory */
  memory: z.tuple([Bits, Bits]).optional(),
  /** per-step reward, used by the `return` estimator; absent = 0 */
  reward: finite().optional(),
});
export type RolloutStep = z.infer<typeof RolloutStep>;

export const AdapterRef = z.strictObject({
  /** round whose adapter served the rollout (0 = the initial adapter) */
  round: z.number().int().min(0),
  name: z.string().min(1),
  sha256: z.string().regex(/^[0-9a-f]{64}$/).optional(),
});

/** Fields of RolloutCompleted; any other top-level field is moved to `meta` (kept, never trusted). */
const rolloutShape = {
  /** unique id, also the Nats-Msg-Id of the publish */
  id: z.string().min(1).max(256),
  policy: z.string().regex(POLICY_NAME, { error: `must match ${POLICY_NAME}` }),
  adapter: AdapterRef,
  /** rollouts of the same scenario / start state share a group (grpo, rloo baselines) */
  group: z.string().min(1).max(256).optional(),
  /** episode reward */
  reward: finite(),
  steps: z.array(RolloutStep).min(1, { error: "must have at least one step" }),
  created_at: z.string().optional(),
};

export const RolloutCompleted = z.looseObject(rolloutShape).transform((raw) => {
  const known: Record<string, unknown> = {};
  const meta: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(raw)) (key in rolloutShape ? known : meta)[key] = value;
  return { ...(known as z.infer<z.ZodObject<typeof rolloutShape>>), meta };
});
/** Input type (what a publisher sends). */
export type RolloutCompletedInput = z.input<typeof RolloutCompleted>;
/** Validated type (what the daemon holds). */
export type RolloutCompleted = z.output<typeof RolloutCompleted>;

// ---------------------------------------------------------------------------------------------------------------
// Reject reasons

/** Why a rollout was refused. Codes are stable (dashboards count them); the message beside names the detail. */
export const RejectReason = {
  invalid_json: "payload is not valid JSON",
  invalid_schema: "payload does not match RolloutCompleted",
  unknown_policy: "event policy does not match the subject's policy",
  code_length: "code has the wrong number of digits",
  too_many_steps: "more steps than policy.maxSteps",
  non_finite_reward: "reward is not a finite number",
  non_finite_logp: "vllm_logp is not a finite number",
  image_missing: "frame file or object not found",
  image_corrupt: "frame cannot be decoded",
  image_format: "frame is not PNG, JPEG or WebP",
  image_too_large: "frame exceeds frames.maxBytes or frames.maxPixels",
  image_outside_roots: "frame path is outside frames.roots",
  stale_adapter: "served by an adapter older than offPolicy.maxStaleness rounds",
  unknown_adapter: "served by an adapter round the loop has not published",
  adapter_mismatch: "adapter sha256 differs from the published one",
  duplicate_id: "a rollout with this id was already consumed",
  round_failed: "its round failed training trainer.maxAttempts times",
} as const;
export type RejectReason = keyof typeof RejectReason;
export const REJECT_REASONS = Object.keys(RejectReason) as RejectReason[];

const iso = z.string();

export const RolloutRejected = z.object({
  type: z.literal("rollout.rejected"),
  policy: z.string(),
  /** stream sequence of the rejected message in RLLOOP_ROLLOUTS */
  seq: z.number().int(),
  /** rollout id when the payload had one */
  id: z.string().nullable(),
  reason: z.enum(REJECT_REASONS as [RejectReason, ...RejectReason[]]),
  message: z.string(),
  /** round the rollout belonged to (round_failed only) */
  round: z.number().int().optional(),
  at: iso,
});
export type RolloutRejected = z.infer<typeof RolloutRejected>;

// ---------------------------------------------------------------------------------------------------------------
// Trainer statistics (the seed's stats.json). Numbers may be NaN/Infinity: the gate must see them.

const anyNumber = z.custom<number>((v) => typeof v === "number", { error: "must be a number" });
/** In JSON, non-finite statistics travel as the strings "NaN", "Infinity", "-Infinity" (see statsReplacer). */
const statNumber = z.union([anyNumber, z.enum(["NaN", "Infinity", "-Infinity"]).transform(Number)]);

/** JSON.stringify replacer keeping non-finite numbers readable (JSON itself would write null). */
export const statsReplacer = (_key: string, value: unknown): unknown =>
  typeof value === "number" && !Number.isFinite(value) ? String(value) : value;

export const PpoStats = z.object({
  pg_loss: statNumber,
  kl: statNumber,
  clip_frac: statNumber,
  logp_gap: statNumber,
  logp_gap_abs: statNumber,
  rows: statNumber,
  train_s: statNumber,
}).loose();
export type PpoStats = z.infer<typeof PpoStats>;

// ---------------------------------------------------------------------------------------------------------------
// Round lifecycle (rlloop.<policy>.rounds)

export const RoundTrigger = { rows: "round.rows reached", groups: "round.groups reached", max_wait: "round.maxWaitS passed" } as const;
export type RoundTrigger = keyof typeof RoundTrigger;

/** Final outcome of a committed round. */
export const RoundOutcome = {
  published: "adapter passed the gate and was published",
  rejected: "adapter failed the health gate; parent adapter kept, rollouts consumed",
  failed: "training failed trainer.maxAttempts times; rollouts rejected",
} as const;
export type RoundOutcome = keyof typeof RoundOutcome;

const roundBase = { policy: z.string(), round: z.number().int().min(1), at: iso };

export const RoundEvent = z.discriminatedUnion("type", [
  z.object({ type: z.literal("round.closed"), ...roundBase, trigger: z.enum(["rows", "groups", "max_wait"]), rows: z.number().int(), rollouts: z.number().int() }),
  z.object({ type: z.literal("round.assembled"), ...roundBase, rows: z.number().int(), sha256: z.string(), dir: z.string() }),
  z.object({ type: z.literal("round.training"), ...roundBase, attempt: z.number().int() }),
  z.object({ type: z.literal("round.trained"), ...roundBase, stats: PpoStats }),
  z.object({ type: z.literal("round.rejected"), ...roundBase, reason: z.string(), stats: PpoStats.optional() }),
  z.object({ type: z.literal("round.failed"), ...roundBase, reason: z.string(), attempts: z.number().int() }),
  z.object({ type: z.literal("round.committed"), ...roundBase, outcome: z.enum(["published", "rejected", "failed"]), revision: z.number().int() }),
  z.object({ type: z.literal("round.published"), ...roundBase, name: z.string() }),
]);
export type RoundEvent = z.infer<typeof RoundEvent>;
export type RoundEventType = RoundEvent["type"];

// ---------------------------------------------------------------------------------------------------------------
// Adapter announcement (rlloop.<policy>.adapters) and the reloader's events (rlloop.<policy>.reloads)

export const AdapterFile = z.object({
  /** file name inside the adapter dir */
  name: z.string(),
  /** object name in the rlloop-adapters object store */
  object: z.string(),
  sha256: z.string(),
  size: z.number().int(),
});

export const AdapterPublished = z.object({
  type: z.literal("adapter.published"),
  policy: z.string(),
  round: z.number().int().min(1),
  /** versioned name to load in vLLM: `<policy>-r<round>` */
  name: z.string(),
  /** adapter directory on the daemon's disk */
  path: z.string(),
  /** object-store prefix `<policy>/r<round>` in bucket rlloop-adapters */
  object: z.string(),
  bucket: z.string(),
  /** sha256 of adapter_model.safetensors (what a reloader verifies) */
  sha256: z.string(),
  files: z.array(AdapterFile),
  stats: PpoStats,
  at: iso,
});
export type AdapterPublished = z.infer<typeof AdapterPublished>;

export const AdapterLoaded = z.object({ type: z.literal("adapter.loaded"), policy: z.string(), replica: z.string(), name: z.string(), at: iso });
export const AdapterLoadFailed = z.object({ type: z.literal("adapter.load_failed"), policy: z.string(), replica: z.string(), name: z.string(), reason: z.string(), at: iso });
export const ReloadEvent = z.discriminatedUnion("type", [AdapterLoaded, AdapterLoadFailed]);
export type ReloadEvent = z.infer<typeof ReloadEvent>;

// ---------------------------------------------------------------------------------------------------------------
// Periodic stats (rlloop.<policy>.stats, core NATS, not persisted) and the service's status answer

export const Phase = {
  starting: "connecting, recovering state",
  intake: "buffering rollouts into the open round",
  assembling: "writing the round folder",
  training: "the trainer runs the round",
  committing: "compare-and-set of the state record",
  publishing: "putting the adapter into the object store and announcing it",
  draining: "SIGTERM received, finishing the current step",
  stopped: "stopped",
} as const;
export type Phase = keyof typeof Phase;

export const LastRoundStats = z.object({
  round: z.number().int(),
  outcome: z.enum(["published", "rejected", "failed"]),
  pg_loss: z.number().nullable(),
  kl: z.number().nullable(),
  clip_frac: z.number().nullable(),
  logp_gap: z.number().nullable(),
  logp_gap_abs: z.number().nullable(),
});

export const StatsEvent = z.object({
  type: z.literal("stats"),
  policy: z.string(),
  at: iso,
  phase: z.enum(Object.keys(Phase) as [Phase, ...Phase[]]),
  /** last committed round */
  round: z.number().int(),
  /** round the intake buffer will become */
  openRound: z.number().int(),
  /** round being trained, null when none */
  trainingRound: z.number().int().nullable(),
  bufferedRows: z.number().int(),
  bufferedRollouts: z.number().int(),
  /** intake rate over the last stats interval */
  rowsPerS: z.number(),
  /** messages held unacked (open + training rounds) */
  pendingAcks: z.number().int(),
  rejected: z.number().int(),
  last: LastRoundStats.nullable(),
  /** GPU memory in bytes reported by the trainer, null when unknown */
  gpuMemory: z.number().nullable(),
  uptimeS: z.number(),
});
export type StatsEvent = z.infer<typeof StatsEvent>;

export const RoundSummary = z.object({
  round: z.number().int(),
  status: z.string(),
  rows: z.number().int(),
  rollouts: z.number().int(),
  sha256: z.string(),
  stats: PpoStats.nullable(),
});
export type RoundSummary = z.infer<typeof RoundSummary>;
