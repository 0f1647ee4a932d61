// Waits between retries that go on for as long as it takes (a round whose trainer fails, a message that cannot be
// judged now): doubling from `minMs` to `maxMs`, cut short by the daemon's stop signal.
import { setTimeout as sleep } from "node:timers/promises";
import { StopRequestedError } from "./errors.js";

export class Backoff {
  #next: number;

  constructor(private readonly minMs: number, private readonly maxMs: number) {
    this.#next = minMs;
  }

  /** The delay the next wait() will take. */
  get nextMs(): number {
    return this.#next;
  }

  /** Waits the current delay and doubles it; rejects with StopRequestedError when `signal` aborts. */
  async wait(signal: AbortSignal): Promise<void> {
    const ms = this.#next;
    this.#next = Math.min(this.maxMs, this.#next * 2);
    try {
      await sleep(ms, undefined, { signal });
    } catch (cause) {
      throw new StopRequestedError("stopped while waiting to retry", { cause });
    }
  }

  reset(): void {
    this.#next = this.minMs;
  }
}

/** The nak delay of the n-th delivery of a message whose judgement failed transiently: 5 s doubling to 5 min. */
export function redeliveryDelayMs(deliveryCount: number): number {
  return Math.min(300_000, 5000 * 2 ** Math.max(0, Math.min(10, deliveryCount - 1)));
}
