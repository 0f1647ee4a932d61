// The state the daemon's parts share while running: one object, created by daemon.ts, passed to admission and
// the round runner. Mutable on purpose (it is the live daemon); each field names its single writer.
import type { Logger } from "pino";
import type { Health, LastRoundStats, Phase, RolloutCompleted } from "../contract/index.js";
import type { AppliedRounds, RecentSeqs } from "./applied.js";
import type { Config } from "./config/index.js";
import type { Nats } from "./connection.js";
import type { ConsumedIds } from "./consumed-ids.js";
import type { EventPublisher } from "./events.js";
import type { HeldMessages } from "./held.js";
import type { Metrics } from "./metrics.js";
import type { BufferEntry, RoundBuffer } from "./rounds.js";
import type { VersionedState } from "./state.js";
import type { GuardVerdict } from "./guard.js";

export interface Buffered extends BufferEntry {
  rollout: RolloutCompleted;
  /** ms timestamp of its admission (the round latency counts from the round's last one) */
  arrivedAt: number;
}

export interface LoopContext {
  readonly config: Config;
  readonly policy: string;
  readonly log: Logger;
  readonly nats: Nats;
  readonly events: EventPublisher;
  readonly metrics: Metrics;
  readonly held: HeldMessages;
  /** the open round (writer: admission adds, daemon takes) */
  readonly buffer: RoundBuffer<Buffered>;
  /** committed rounds' sequences and ids (writer: round runner, recovery) */
  readonly applied: AppliedRounds;
  /** ids consumed within intake.duplicateWindowS, in KV (writer: round runner) */
  readonly consumedIds: ConsumedIds;
  /** sequences resolved by rejection (writer: admission, round runner) */
  readonly rejectedSeqs: RecentSeqs;
  /** sequence → rollout id of the round in the runner, poisoned ones included (writer: daemon, round runner) */
  readonly reserved: Map<number, string>;
  /** aborted when the daemon stops: waits and retries give up, their work stays for the next start */
  readonly stopSignal: AbortSignal;
  /** committed state and its KV revision (writer: round runner) */
  state: VersionedState;
  /** highest consumer ack floor seen (writer: daemon's stats tick, round runner) */
  ackFloor: number;
  /** running totals for the stats event (writers: admission, round runner) */
  tally: {
    acceptedRows: number;
    rejected: number;
    last: LastRoundStats | null;
    /** bytes, from the trainer's stats when it reports `gpu_memory_bytes` */
    gpuMemory: number | null;
  };
  /** the sum of `degradedBy` (writers: setDegraded, setHealthy) */
  health: Health;
  /** what makes the daemon degraded now, by source, each with its cause and since when */
  readonly degradedBy: Map<DegradedSource, { cause: string; since: string }>;
  /** the live-outcome guard's last verdict on the serving lineage (writers: daemon at start, round runner) */
  guard: GuardVerdict | null;
  phase: Phase;
  stopping: boolean;
}

export function setPhase(ctx: LoopContext, phase: Phase): void {
  ctx.phase = phase;
  ctx.metrics.setPhase(phase);
}

/** Who says the daemon is degraded: the round runner (a trainer fault, a step retried after training), the frames
 *  roots (one not answering, or failing as a host does) or admission (rollouts that keep failing to be judged for a
 *  reason not theirs). Each clears only its own cause. */
export type DegradedSource = "round" | "frames" | "intake";

/** Degraded with a cause from `source`; the first cause's time is kept while it lasts. */
export function setDegraded(ctx: LoopContext, cause: string, source: DegradedSource = "round"): void {
  const since = ctx.degradedBy.get(source)?.since ?? new Date().toISOString();
  ctx.degradedBy.set(source, { cause, since });
  sumHealth(ctx);
}

export function setHealthy(ctx: LoopContext, source: DegradedSource = "round"): void {
  const was = ctx.degradedBy.get(source);
  if (!was) return;
  ctx.degradedBy.delete(source);
  sumHealth(ctx);
  ctx.log.info({ was: was.cause }, ctx.health.status === "ok" ? "health ok again" : `${source}: ok again; still degraded`);
}

/** The cause `source` gave, or null when it says nothing is wrong. */
export function degradedCause(ctx: LoopContext, source: DegradedSource): string | null {
  return ctx.degradedBy.get(source)?.cause ?? null;
}

function sumHealth(ctx: LoopContext): void {
  const causes = [...ctx.degradedBy.values()];
  ctx.health = causes.length === 0
    ? { status: "ok", cause: null, since: null }
    : { status: "degraded", cause: causes.map((c) => c.cause).join("; "), since: causes.map((c) => c.since).sort()[0] as string };
  ctx.metrics.degraded.set(causes.length === 0 ? 0 : 1);
}
