// Named errors of the loop, and predicates so call sites never compare strings. Each takes Error's own
// (message, { cause }) arguments; only RolloutRejectedError adds a field.
import type { RejectReason } from "./schema.js";

/** The configuration is invalid; the message names the field, the rule and the value. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

/** A rollout is refused; `reason` is a stable code from RejectReason, the message says what exactly. */
export class RolloutRejectedError extends Error {
  override name = "RolloutRejectedError";
  constructor(readonly reason: RejectReason, message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The trainer failed a round (exit code, missing output, unreadable stats). */
export class TrainerError extends Error {
  override name = "TrainerError";
}

/** The state record is not where this daemon expects it: another writer moved it (two daemons on one policy), or
 *  it is behind rounds committed on disk (it lost writes). The daemon must not continue. */
export class StateConflictError extends Error {
  override name = "StateConflictError";
}

/** A replayed round does not reproduce its manifest. */
export class ReplayMismatchError extends Error {
  override name = "ReplayMismatchError";
}

export const isConfigError = (err: unknown): err is ConfigError => err instanceof ConfigError;
export const isRolloutRejected = (err: unknown): err is RolloutRejectedError => err instanceof RolloutRejectedError;
export const isTrainerError = (err: unknown): err is TrainerError => err instanceof TrainerError;
export const isStateConflict = (err: unknown): err is StateConflictError => err instanceof StateConflictError;

/** One line per error in the cause chain, for the CLI's top-level handler. */
export function causeChain(err: unknown): string[] {
  const lines: string[] = [];
  let cur: unknown = err;
  for (let depth = 0; cur !== undefined && cur !== null && depth < 8; depth++) {
    lines.push(cur instanceof Error ? `${cur.name}: ${cur.message}` : String(cur));
    cur = cur instanceof Error ? cur.cause : undefined;
  }
  return lines;
}
