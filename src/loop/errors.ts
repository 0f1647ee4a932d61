// Named errors of the loop, and predicates so call sites never compare strings. Each takes Error's own
// (message, { cause }) arguments; only RolloutRejectedError adds a field.
import { errors as natsErrors } from "@nats-io/nats-core";
import { JetStreamApiError, JetStreamError } from "@nats-io/jetstream";
import type { RejectReason } from "../contract/index.js";

/** The configuration is invalid, or what it names is unusable (a missing model, a trainer that cannot start). */
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

/** The trainer failed a job (exit code, missing output, unreadable stats, ranks that died). */
export class TrainerError extends Error {
  override name = "TrainerError";
}

/** The state record is not where this daemon expects it: another writer moved it (two daemons on one policy), or
 *  it is behind rounds committed on disk (it lost writes). The daemon must not continue. */
export class StateConflictError extends Error {
  override name = "StateConflictError";
}

/** Another daemon holds the work directory. */
export class WorkDirLockedError extends Error {
  override name = "WorkDirLockedError";
}

/** The policy's lease is held by a daemon elsewhere (a start without --standby), or this daemon lost it: another
 *  took over. A daemon that lost its lease must not commit anything. */
export class LeaseError extends Error {
  override name = "LeaseError";
}

/** A replayed round does not reproduce its manifest. */
export class ReplayMismatchError extends Error {
  override name = "ReplayMismatchError";
}

/** The daemon is stopping: the step in flight gave up, its work stays for the next start. */
export class StopRequestedError extends Error {
  override name = "StopRequestedError";
}

export const isRolloutRejected = (err: unknown): err is RolloutRejectedError => err instanceof RolloutRejectedError;
export const isStateConflict = (err: unknown): err is StateConflictError => err instanceof StateConflictError;
export const isStopRequested = (err: unknown): err is StopRequestedError => err instanceof StopRequestedError;
export const isLeaseError = (err: unknown): err is LeaseError => err instanceof LeaseError;

/**
 * Something the host or the configuration lacks right now, not the rollout: a frame root that is not there (an
 * unmounted share), the frames object store missing. Judging is retried later (admission.ts), never a rejection.
 */
export class HostFaultError extends Error {
  override name = "HostFaultError";
}

/** Another message of the same rollout id is pending: being judged right now, or in the open or the training round
 *  (`inRound`). This one waits for that to end (a redelivery), since whether it is a duplicate depends on how it ends:
 *  that copy trained, or rejected for what is wrong with it alone (by its judgement, or by its round: `poison`,
 *  `logp_mismatch`). Not a failure of this message's judgement. */
export class IdPendingError extends Error {
  override name = "IdPendingError";
  constructor(message: string, readonly inRound: boolean) {
    super(message);
  }
}

/** errno codes of failures of the host (disk, descriptors, network), not of what is being read. */
const HOST_ERRNO = new Set(["EIO", "ENOSPC", "EDQUOT", "EROFS", "EMFILE", "ENFILE", "ENOMEM", "EAGAIN", "EBUSY", "EINTR", "ETIMEDOUT", "ECONNRESET", "ECONNREFUSED", "EPIPE", "EHOSTUNREACH", "ENETUNREACH", "ENOTCONN", "ESTALE"]);

/**
 * A failure worth retrying later: NATS (a timeout, a disconnect, JetStream not answering, or an API error: the
 * server's state — a stream not there now, a leader being elected — never the rollout's) or the host's I/O. What is
 * neither (a TypeError, a RangeError such as a stack overflow) would fail the same way again: the caller rejects
 * instead of retrying forever.
 */
export function isTransient(err: unknown): boolean {
  if (err instanceof natsErrors.TimeoutError || err instanceof natsErrors.ConnectionError || err instanceof natsErrors.RequestError
    || err instanceof natsErrors.NoRespondersError || err instanceof natsErrors.ClosedConnectionError || err instanceof JetStreamError
    || err instanceof JetStreamApiError || err instanceof HostFaultError) return true;
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return typeof code === "string" && HOST_ERRNO.has(code);
}

/** errno codes of a file system that cannot take the work directory's writes now (full, over quota, read-only,
 *  failing; the system out of file handles): the host's, not a round's, for as long as it lasts. EMFILE is not one:
 *  a process out of its own descriptors is better restarted by its supervisor than left waiting. */
const DISK_ERRNO = new Set(["ENOSPC", "EDQUOT", "EIO", "EROFS", "ENFILE"]);

/** The work directory's disk has no room for what a step must write, found before the write (disk-room.ts): the
 *  host's fault, as the write's ENOSPC would be. */
export class NoDiskRoomError extends Error {
  override name = "NoDiskRoomError";
}

/** A failure of the disk under the work directory, not of the round: the round waits for it (round-runner.ts). */
export function isDiskFault(err: unknown): boolean {
  if (err instanceof NoDiskRoomError) return true;
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return typeof code === "string" && DISK_ERRNO.has(code);
}

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
