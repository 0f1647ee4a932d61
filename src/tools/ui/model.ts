// The web UI's own view of a running loop: what the page shows, in the page's terms. The wire (NATS subjects, event
// schemas, field names) is translated into these types in source.ts and nowhere else, so a change of the wire
// contract changes that one module; the store, the HTTP/SSE server and the page only see the types below.
// Imported by the page too: no Node imports here.

/** How the daemon is doing. `unknown` until a stats event or status answer arrived. */
export interface UiHealth {
  status: "ok" | "degraded" | "unknown";
  /** why it is degraded */
  cause: string | null;
  /** since when (ms since epoch) */
  sinceMs: number | null;
}

/** The daemon's latest snapshot (its stats event), the committed state record, and the monitor's connection. */
export interface UiLive {
  phase: string | null;
  health: UiHealth;
  /** last committed round */
  committedRound: number | null;
  openRound: number | null;
  trainingRound: number | null;
  bufferedRows: number | null;
  bufferedRollouts: number | null;
  /** the rows that close a round (the monitor's config `round.rows`), to show the buffer's fill; null = unknown */
  roundRows: number | null;
  rowsPerS: number | null;
  pendingAcks: number | null;
  /** rollouts rejected since the daemon started */
  rejectedSinceStart: number | null;
  gpuMemoryBytes: number | null;
  uptimeS: number | null;
  /** when the daemon published its last snapshot (ms since epoch) */
  statsAtMs: number | null;
  /** how often the daemon publishes one (s), to tell a stale snapshot; null = unknown */
  statsIntervalS: number | null;
  /** the adapter rollouts should be served by (committed state record: after a rollback, its target or the round
   *  trained again from it, never the regressed adapter); `name` is the versioned name replicas load */
  servingAdapter: { round: number; name: string; sha256: string | null } | null;
  /** whether the monitor is connected to NATS */
  connected: boolean;
  /** one line about a problem of the monitor itself (service not answering, connection lost, stopped) */
  notice: string | null;
}

/** One round, folded from its lifecycle events (or the service's summary for a round whose events expired). */
export interface RoundPoint {
  round: number;
  /** where it is: closed, assembled, training, trained, attempt failed, committed, or its outcome */
  status: string;
  /** final outcome once committed (published, rejected, ...) */
  outcome: string | null;
  /** what closed it (rows, groups, max_wait) */
  trigger: string | null;
  /** rows trained (the trainer's count), else the rows the round closed with */
  rows: number | null;
  rollouts: number | null;
  /** training attempts started */
  attempts: number | null;
  pg_loss: number | null;
  kl: number | null;
  clip_frac: number | null;
  logp_gap: number | null;
  logp_gap_abs: number | null;
  /** the trainer's seconds (stats.json train_s) */
  train_s: number | null;
  /** seconds from the round's close to its adapter's announcement (or to its commit when nothing was published) */
  latency_s: number | null;
  closedAtMs: number | null;
  finishedAtMs: number | null;
  /** why the gate refused it, why an attempt failed, ... */
  note: string | null;
}

/** Episode rewards of the rollouts served by one adapter round: mean with a 95% interval of the mean. */
export interface RewardPoint {
  adapterRound: number;
  count: number;
  mean: number;
  /** sample standard deviation; null below 2 rollouts */
  sd: number | null;
  /** mean ∓ 1.96·sd/√count (normal approximation); null below 2 rollouts */
  lo: number | null;
  hi: number | null;
}

/** One rejected rollout. */
export interface RejectionPoint {
  atMs: number;
  reason: string;
  message: string;
  id: string | null;
  seq: number;
}

/** Rejections of one reason. */
export interface ReasonRow {
  reason: string;
  count: number;
  lastAtMs: number;
  lastMessage: string;
}

/** An adapter a round produced, with the health gate's verdict. */
export interface AdapterRow {
  round: number;
  /** the versioned name replicas load */
  name: string | null;
  /** sha256 of its weights (null when the gate refused it: a refused adapter is never announced) */
  sha256: string | null;
  verdict: "passed" | "refused";
  /** the gate's reason for a refusal */
  reason: string | null;
  atMs: number;
}

/** What a replica did with one adapter. */
export interface ReplicaLoad {
  /** the adapter's versioned name (AdapterRow.name) */
  name: string;
  status: "loaded" | "load_failed";
  reason: string | null;
  atMs: number;
}

/** One vLLM replica: its newest events per adapter, newest first. */
export interface ReplicaRow {
  replica: string;
  loads: ReplicaLoad[];
}

/** One side of the guard's comparison, as its evidence states it. */
export interface RollbackSide {
  /** the adapter */
  round: number;
  /** its committed rollouts */
  count: number;
  /** their mean episode reward */
  mean: number;
  /** the confidence bound used, in reward units: the upper for the candidate, the lower for the baseline */
  bound: number;
}

/** Why the live-outcome guard rolled back: its test and the numbers it decided on. */
export interface RollbackEvidence {
  test: "unpaired" | "paired";
  /** the false-rollback rate the decision holds to (guard.alpha) */
  alpha: number;
  /** guard.minEffect, reward units */
  minEffect: number;
  /** the adapter found worse */
  candidate: RollbackSide;
  /** the earlier adapter found better (the target) */
  baseline: RollbackSide;
  /** groups compared pairwise (paired test) */
  pairs: number | null;
  /** upper confidence bound of candidate − baseline mean reward: a rollback needs it below −minEffect */
  differenceUpper: number;
}

/** A rollback: the loop went back to serving and continuing an earlier adapter (the live-outcome guard, or an
 *  operator's `rlloop rollback`). Keyed by `seq`, the daemon's count of rollbacks of the policy. */
export interface RollbackRow {
  seq: number;
  /** guard | manual */
  trigger: string;
  /** the adapter served before */
  fromRound: number;
  /** the adapter the guard found worse (null: manual); it may be an ancestor of `fromRound` */
  regressedRound: number | null;
  /** the adapter served and continued from then on (the target) */
  toRound: number;
  /** the target's versioned name and weights' sha256 (null when only the state record told of it) */
  toName: string;
  toSha256: string | null;
  /** the round that committed it: a guard's rollback trains that round again from the target; an operator's comes
   *  after it, and the next round continues the target */
  committedRound: number;
  reason: string;
  /** the guard's evidence (null: manual) */
  evidence: RollbackEvidence | null;
  atMs: number;
}

/** Meanings of the codes the page shows (phases, reject reasons, rollback triggers), from the wire contract's tables. */
export interface UiMeanings {
  phases: Record<string, string>;
  reasons: Record<string, string>;
  triggers: Record<string, string>;
}

/** Everything the page shows. Lists are in ascending order (rounds by round, rejections by time, rollbacks by seq). */
/** What the monitor and an open page keep, the newest: rounds (with the adapters and rewards from the oldest kept
 *  on) and rejections for the over-time plot. A daemon runs for weeks. */
export const KEPT_ROUNDS = 10_000;
export const KEPT_REJECTIONS = 20_000;

export interface UiSnapshot {
  /** the view model's format, bumped on incompatible changes */
  format: 1;
  /** the store's revision: every patch has a higher one */
  revision: number;
  policy: string;
  /** where the data comes from (NATS URL) */
  source: string;
  /** whether the stored history has been read to its end */
  caughtUp: boolean;
  live: UiLive;
  meanings: UiMeanings;
  rounds: RoundPoint[];
  rewards: RewardPoint[];
  reasons: ReasonRow[];
  rejections: RejectionPoint[];
  adapters: AdapterRow[];
  replicas: ReplicaRow[];
  /** by seq */
  rollbacks: RollbackRow[];
}

/** What changed since the previous revision: rows replace rows with the same key; rejections are new ones. */
export interface UiPatch {
  revision: number;
  caughtUp?: boolean;
  live?: UiLive;
  rounds?: RoundPoint[];
  rewards?: RewardPoint[];
  reasons?: ReasonRow[];
  rejections?: RejectionPoint[];
  adapters?: AdapterRow[];
  replicas?: ReplicaRow[];
  rollbacks?: RollbackRow[];
}
