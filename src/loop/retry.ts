// Retrying a step that must eventually succeed (commit, publish, the records of a committed round) through NATS
// outages: p-retry with no limit on attempts, backoff 0.5 s doubling to 15 s; `fatal` errors end the retries with
// the last error, and so does the daemon's stop, cutting a wait between two attempts short (a step left undone by a
// stop is one a kill could have left: the next start resumes it). A stop never keeps an attempt from running or its
// result from being used: a drain lets the round in hand reach its commit. A step still failing after `health.after`
// attempts is reported (the daemon says `degraded` with the cause: a retry that never gives up must not look
// healthy), and the report is withdrawn when it succeeds.
import pRetry from "p-retry";
import type { Logger } from "pino";
import { StopRequestedError } from "./errors.js";

export interface RetryOptions {
  what: string;
  log: Logger;
  fatal?: (err: unknown) => boolean;
  /** the daemon's stop (LoopContext.stopSignal) */
  stop?: AbortSignal;
  health?: { after: number; degraded(cause: string): void; recovered(): void };
}

export async function retrying<T>(step: () => Promise<T>, opts: RetryOptions): Promise<T> {
  let reported = false;
  const stopped = () => opts.stop?.aborted ?? false;
  // p-retry's signal also refuses to start an attempt or to return a success once aborted: it is aborted only while
  // waiting between two attempts, so that the stop cuts the wait and nothing else
  const wait = new AbortController();
  let waiting = false;
  const stopWaiting = () => {
    if (waiting) wait.abort(new StopRequestedError(`${opts.what}: stopped while waiting to retry`));
  };
  opts.stop?.addEventListener("abort", stopWaiting);
  const attempt = () => {
    waiting = false;
    return step();
  };
  const result = await pRetry(attempt, {
    retries: Number.POSITIVE_INFINITY,
    minTimeout: 500,
    maxTimeout: 15_000,
    factor: 2,
    randomize: false,
    signal: wait.signal,
    shouldRetry: ({ error }) => (waiting = !(opts.fatal?.(error) ?? false) && !stopped()),
    onFailedAttempt: ({ error, attemptNumber }) => {
      if (opts.fatal?.(error) || stopped()) return;
      opts.log.warn({ err: error, attempt: attemptNumber }, `${opts.what} failed; retrying`);
      if (opts.health && attemptNumber >= opts.health.after) {
        reported = true;
        opts.health.degraded(`${opts.what} failing (attempt ${attemptNumber}, retrying): ${error.message}`);
      }
    },
  }).catch((err: unknown) => {
    if (reported) opts.health?.recovered();
    throw err;
  }).finally(() => opts.stop?.removeEventListener("abort", stopWaiting));
  if (reported) opts.health?.recovered();
  return result;
}
