// The periodic stats event on rlloop.<policy>.stats (DESIGN.md data flow step 9), built from the live context,
// and the ticker that publishes it every observe.statsIntervalS and measures the intake rate between ticks.
import type { LoopContext } from "./context.js";
import type { StatsEvent } from "./schema.js";

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
    round: ctx.state.record.round,
    openRound: extra.openRound,
    trainingRound: extra.trainingRound,
    bufferedRows: ctx.buffer.rows,
    bufferedRollouts: ctx.buffer.size,
    rowsPerS: extra.rowsPerS,
    pendingAcks: ctx.held.size,
    rejected: ctx.tally.rejected,
    last: ctx.tally.last,
    gpuMemory: ctx.tally.gpuMemory,
    uptimeS: extra.uptimeS,
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
      ctx.metrics.bufferedRows.set(event.bufferedRows);
      ctx.metrics.pendingAcks.set(event.pendingAcks);
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
