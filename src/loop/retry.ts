// Retrying a step that must eventually succeed (commit, publish, the records of a committed round) through NATS
// outages: p-retry with no limit on attempts, backoff 0.5 s doubling to 15 s; `fatal` errors and a stop request end
// the retries with the last error. A step still failing after `health.after` attempts is reported (the daemon says
// `degraded` with the cause: a retry that never gives up must not look healthy), and the report is withdrawn when it
// succeeds.
import pRetry from "p-retry";
import type { Logger } from "pino";

export interface RetryOptions {
  what: string;
  log: Logger;
  fatal?: (err: unknown) => boolean;
  stopped?: () => boolean;
  health?: { after: number; degraded(cause: string): void; recovered(): void };
}

export async function retrying<T>(step: () => Promise<T>, opts: RetryOptions): Promise<T> {
  let reported = false;
  const result = await pRetry(step, {
    retries: Number.POSITIVE_INFINITY,
    minTimeout: 500,
    maxTimeout: 15_000,
    factor: 2,
    randomize: false,
    shouldRetry: ({ error }) => !(opts.fatal?.(error) ?? false) && !(opts.stopped?.() ?? false),
    onFailedAttempt: ({ error, attemptNumber }) => {
      if (opts.fatal?.(error) || opts.stopped?.()) return;
      opts.log.warn({ err: error, attempt: attemptNumber }, `${opts.what} failed; retrying`);
      if (opts.health && attemptNumber >= opts.health.after) {
        reported = true;
        opts.health.degraded(`${opts.what} failing (attempt ${attemptNumber}, retrying): ${error.message}`);
      }
    },
  }).catch((err: unknown) => {
    if (reported) opts.health?.recovered();
    throw err;
  });
  if (reported) opts.health?.recovered();
  return result;
}
