// Retry a step that must eventually succeed (commit, publish, acks of a committed round) through NATS outages.
// Backoff 0.5 s doubling to 15 s; `fatal` errors and a stop request end the retries.
import type { Logger } from "pino";

export interface RetryOptions {
  what: string;
  log: Logger;
  fatal?: (err: unknown) => boolean;
  stopped?: () => boolean;
}

export async function retrying<T>(step: () => Promise<T>, opts: RetryOptions): Promise<T> {
  let delay = 500;
  for (;;) {
    try {
      return await step();
    } catch (err) {
      if (opts.fatal?.(err) || opts.stopped?.()) throw err;
      opts.log.warn({ err, retryInMs: delay }, `${opts.what} failed; retrying`);
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(15_000, delay * 2);
    }
  }
}
