// The periodic stats event on rlloop.<policy>.stats (DESIGN.md data flow step 9), built from the live context,
// and the ticker that publishes it every observe.statsIntervalS and measures the intake rate between ticks.
import type { StatsEvent } from "../contract/index.js";
import type { LoopContext } from "./context.js";

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
