// Retrying a step that must eventually succeed (commit, publish, the records of a committed round) through NATS
// outages: p-retry with no limit on attempts, backoff 0.5 s doubling to 15 s; `fatal` errors and a stop request end
// the retries with the last error.
import pRetry from "p-retry";
import type { Logger } from "pino";

export interface RetryOptions {
  what: string;
  log: Logger;
  fatal?: (err: unknown) => boolean;
  stopped?: () => boolean;
}

export function retrying<T>(step: () => Promise<T>, opts: RetryOptions): Promise<T> {
  return pRetry(step, {
    retries: Number.POSITIVE_INFINITY,
    minTimeout: 500,
    maxTimeout: 15_000,
    factor: 2,
    randomize: false,
    shouldRetry: ({ error }) => !(opts.fatal?.(error) ?? false) && !(opts.stopped?.() ?? false),
    onFailedAttempt: ({ error, attemptNumber }) => {
      if (opts.fatal?.(error) || opts.stopped?.()) return;
      opts.log.warn({ err: error, attempt: attemptNumber }, `${opts.what} failed; retrying`);
    },
  });
}
