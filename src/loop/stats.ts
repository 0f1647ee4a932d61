// The periodic stats event on rlloop.<policy>.stats (DESIGN.md data flow step 9), built from the live context,
// and the ticker that publishes it every observe.statsIntervalS and measures the intake rate between ticks.
import type { GuardStatus, OutcomeSummary, StatsEvent } from "../contract/index.js";
import type { LoopContext } from "./context.js";
import { outcomeSummary } from "./guard.js";

/** Adapters whose live outcomes the stats event carries (the newest). */
const OUTCOMES_SHOWN = 8;

export interface SnapshotExtra {
  openRound: number;
  trainingRound: number | null;
  uptimeS: number;
  rowsPerS: number;
}

export function statsEvent(ctx: LoopContext, extra: SnapshotExtra): StatsEvent {
  return {
    type: "stats",
    policy: ctx.policy,
    at: new Date().toISOString(),
    phase: ctx.phase,
    health: ctx.health,
    round: ctx.state.record.round,
    open_round: extra.openRound,
    training_round: extra.trainingRound,
    buffered_rows: ctx.buffer.rows,
    buffered_rollouts: ctx.buffer.size,
    rows_per_s: extra.rowsPerS,
    pending_acks: ctx.held.size,
    rejected: ctx.tally.rejected,
    last: ctx.tally.last,
    gpu_memory_bytes: ctx.tally.gpuMemory,
    uptime_s: extra.uptimeS,
    outcomes: outcomeSummaries(ctx).slice(-OUTCOMES_SHOWN),
    guard: guardStatus(ctx),
  };
}

export function outcomeSummaries(ctx: Pick<LoopContext, "state" | "config">): OutcomeSummary[] {
  const { outcomes } = ctx.state.record;
  return outcomes.adapters.map((a) => outcomeSummary(a, ctx.config.guard, outcomes.range));
}

function guardStatus(ctx: LoopContext): GuardStatus {
  const v = ctx.guard;
  const rb = ctx.state.record.rollback;
  return {
    enabled: ctx.config.guard.enabled,
    status: v?.status ?? "off",
    candidate: v && "candidate" in v ? v.candidate : null,
    target: v?.status === "regressed" ? v.target : null,
    margin: v?.status === "ok" ? v.margin : null,
    reason: v?.status === "off" || v?.status === "waiting" ? v.reason : v?.status === "regressed" ? `r${v.candidate} worse than r${v.target} (${v.evidence.test})` : null,
    last_rollback: rb ? { seq: rb.seq, trigger: rb.trigger, from: rb.from, to: rb.to, round: rb.round, at: rb.at } : null,
  };
}

export class StatsTicker {
  readonly #timer: NodeJS.Timeout;
  #rows: number;
  #at = performance.now();
  /** rows/s over the last interval */
  rate = 0;

  constructor(private readonly ctx: LoopContext, snapshot: () => StatsEvent, onTick: () => Promise<void>) {
    this.#rows = ctx.tally.acceptedRows;
    this.#timer = setInterval(() => {
      this.#measure();
      const event = snapshot();
      ctx.events.stats(event);
      ctx.metrics.bufferedRows.set(event.buffered_rows);
      ctx.metrics.pendingAcks.set(event.pending_acks);
      ctx.metrics.bufferedRollouts.set(event.buffered_rollouts);
      ctx.metrics.setOutcomes(event.outcomes ?? [], event.guard?.status === "regressed");
      void onTick().catch(() => {});
    }, ctx.config.observe.statsIntervalS * 1000);
    this.#timer.unref();
  }

  #measure() {
    const now = performance.now();
    const rows = this.ctx.tally.acceptedRows;
    this.rate = ((rows - this.#rows) * 1000) / Math.max(1, now - this.#at);
    this.#rows = rows;
    this.#at = now;
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}
