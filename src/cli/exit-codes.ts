// The exit codes of `rlloop` (README "Exit codes"): the CLI is the only place that decides them.
import { CommanderError } from "commander";
import { ConfigError, LeaseError, ReplayMismatchError, StateConflictError, WorkDirLockedError } from "../loop/errors.js";
import { TrainInputError } from "../train/errors.js";

export const EXIT = {
  /** done; also a long-running command stopped by its first SIGINT/SIGTERM after a clean drain */
  ok: 0,
  /** a runtime failure (NATS unreachable, a fatal error of the daemon, a failed training) */
  failure: 1,
  /** a usage or configuration error: bad flags, an invalid config, inputs that do not exist */
  usage: 2,
  /** another daemon holds the work dir or the policy's lease, or moved the state record */
  conflict: 3,
  /** replay rebuilt a round that differs from its manifest */
  mismatch: 4,
  /** forced out by a second SIGINT / SIGTERM (128 + the signal's number) */
  sigint: 130,
  sigterm: 143,
} as const;

export function exitCodeOf(err: unknown): number {
  if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
  if (err instanceof ConfigError || err instanceof TrainInputError) return EXIT.usage;
  if (err instanceof StateConflictError || err instanceof WorkDirLockedError || err instanceof LeaseError) return EXIT.conflict;
  if (err instanceof ReplayMismatchError) return EXIT.mismatch;
  return EXIT.failure;
}
