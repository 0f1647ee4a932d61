// The state the daemon's parts share while running: one object, created by daemon.ts, passed to admission and
// the round runner. Mutable on purpose (it is the live daemon); each field names its single writer.
import type { Logger } from "pino";
import type { AppliedRounds, RecentSeqs } from "./applied.js";
import type { Config } from "./config.js";
import type { Nats } from "./connection.js";
import type { EventPublisher } from "./events.js";
import type { HeldMessages } from "./held.js";
import type { Metrics } from "./metrics.js";
import type { BufferEntry, RoundBuffer } from "./rounds.js";
import type { LastRoundStats, Phase, RolloutCompleted } from "./schema.js";
import type { z } from "zod";
import type { VersionedState } from "./state.js";

export interface Buffered extends BufferEntry {
  rollout: RolloutCompleted;
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
  /** sequences resolved by rejection (writer: admission, round runner) */
  readonly rejectedSeqs: RecentSeqs;
  /** sequence → rollout id of the round in the runner (writer: daemon) */
  readonly reserved: Map<number, string>;
  /** committed state and its KV revision (writer: round runner) */
  state: VersionedState;
  /** highest consumer ack floor seen (writer: daemon's stats tick, round runner) */
  ackFloor: number;
  /** running totals for the stats event (writers: admission, round runner) */
  tally: {
    acceptedRows: number;
    rejected: number;
    last: z.infer<typeof LastRoundStats> | null;
    /** bytes, from the trainer's stats when it reports `gpu_memory_bytes` */
    gpuMemory: number | null;
  };
  phase: Phase;
  stopping: boolean;
}

export function setPhase(ctx: LoopContext, phase: Phase): void {
  ctx.phase = phase;
  ctx.metrics.setPhase(phase);
}
