// Consecutive phases of a piece of work, each timed from the end of the one before, for the log line that says
// where its time went (a PPO job's start, a round's commit).
/** Two decimals, for seconds in log lines. */
export const round2 = (x: number) => Math.round(x * 100) / 100;

export class PhaseClock {
  private readonly started = performance.now();
  private last = this.started;
  private readonly seconds: Record<string, number> = {};

  /** Ends the phase named `phase` now; the next one starts. */
  lap(phase: string): void {
    const now = performance.now();
    this.seconds[phase] = round2((now - this.last) / 1000);
    this.last = now;
  }

  /** Seconds from the clock's start to the end of the last phase. */
  totalSeconds(): number {
    return (this.last - this.started) / 1000;
  }

  /** Seconds by phase, two decimals. */
  laps(): Record<string, number> {
    return { ...this.seconds };
  }
}
