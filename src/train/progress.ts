// Progress lines of a run (pino JSON, rank 0 only): rows/s, ETA, loss, peak memory, like the seed's
// "SFT update u/total loss … s/update eta … peak … GiB" lines, logged for the first five steps and every 50th.
import type { Logger } from "pino";
import { round2 } from "../phase-clock.js";

export interface ProgressStep {
  step: number; // 1-based
  loss?: number; // absent for passes without a loss (the frozen log-prob pass)
  rows: number; // rows this step consumed on all ranks
  [extra: string]: number | undefined;
}

export class Progress {
  private readonly start = performance.now();
  private rows = 0;

  constructor(
    private readonly log: Logger,
    private readonly phase: string,
    private readonly totalSteps: number,
    private readonly enabled: boolean,
  ) {}

  step({ step, loss, rows, ...extra }: ProgressStep): void {
    this.rows += rows;
    if (!this.enabled || !(step <= 5 || step % 50 === 0 || step === this.totalSteps)) return;
    const seconds = (performance.now() - this.start) / 1000;
    this.log.info(
      {
        phase: this.phase,
        step,
        steps: this.totalSteps,
        loss,
        rowsPerS: round2(this.rows / seconds),
        etaS: Math.round(((this.totalSteps - step) * seconds) / step),
        peakRssGiB: round2(peakRssBytes() / 2 ** 30),
        ...extra,
      },
      `${this.phase} ${step}/${this.totalSteps}`,
    );
  }
}

export { round2 };

/** Seconds since a performance.now() reading, two decimals. */
export const secondsSince = (since: number) => round2((performance.now() - since) / 1000);

/** Peak resident memory of this process (the host side; device memory is the native module's to report). */
export function peakRssBytes(): number {
  return process.resourceUsage().maxRSS * 1024;
}

