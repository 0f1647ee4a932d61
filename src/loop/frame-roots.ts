// Frames by {path}: read under the configured roots, their file-system calls bounded. A root on a network mount that
// stops answering (an NFS server gone, a FUSE daemon hung) blocks the thread of every call into it for as long as the
// mount hangs: a synchronous call would block the event loop (intake, lease renewals, every other rollout), an
// asynchronous one holds one of libuv's 4 threads, which decoding, every file write and DNS share. So:
//   - at most CALLS_IN_FLIGHT (2) frame-root calls run at once, and at most one per root: whatever hangs, half of
//     libuv's pool stays free, and a single hung root leaves the other roots a call at a time;
//   - each call has a deadline, frames.rootTimeoutS (counted from its start, so including any wait for a libuv
//     thread). A call past it fails its frame as the host's fault (the rollout is judged again later, never
//     rejected for it) and the root counts as hung: its frames fail at once, without a call, until the overdue call
//     returns. While every slot is held by an overdue call (two roots hung), every {path} frame fails at once.
// Not worker threads: a thread stuck in a system call keeps the process from exiting. A stuck libuv thread does too:
// a daemon stopped while a root hangs has drained everything, but exits only once the mount answers or the service
// manager kills it (docs/daemon.md).
import { readFile, realpath, stat } from "node:fs/promises";
import { isAbsolute, resolve, sep } from "node:path";
import { HostFaultError, isTransient, RolloutRejectedError } from "./errors.js";

/** Frame-root calls running at once, over all roots (a root: one). */
const CALLS_IN_FLIGHT = 2;

export class FrameRoots {
  readonly #roots: Map<string, RootState>;
  readonly #slots = new Slots(CALLS_IN_FLIGHT);
  #overdue = 0;
  #recheck: NodeJS.Timeout | null = null;

  /** `roots`: absolute paths; `timeoutMs`: the deadline of one file-system call under a root; `onChange`: called
   *  when a root starts or stops failing (failing() says which and why: the daemon's health). */
  constructor(readonly roots: readonly string[], readonly timeoutMs = 10_000, private readonly onChange: () => void = () => {}) {
    this.#roots = new Map(roots.map((root) => [root, new RootState(root, timeoutMs)]));
  }

  /** The roots whose last call failed as a host does (past its deadline, a root gone, EIO, ENOTCONN), each with
   *  that failure: their frames wait. A root leaves the list at the first call it answers. */
  failing(): Array<{ root: string; cause: string }> {
    return [...this.#roots.values()].flatMap((r) => (r.failure === null ? [] : [{ root: r.root, cause: r.failure }]));
  }

  /** Calls past their deadline that have not returned: each holds a thread, which keeps the process from exiting. */
  get overdueCalls(): number {
    return this.#overdue;
  }

  /** The bytes of the frame file at `path` (relative: under the first root), which must resolve inside a root
   *  (symlinks followed) and hold at most `maxBytes`. */
  async read(path: string, maxBytes: number): Promise<Buffer> {
    const root0 = this.roots[0];
    if (root0 === undefined) throw new RolloutRejectedError("image_outside_roots", `frame path ${JSON.stringify(path)} refused: frames.roots is empty`);
    // the lexical check catches ../ escapes even for missing files
    const lexical = isAbsolute(path) ? resolve(path) : resolve(root0, path);
    const root = this.roots.find((r) => inside(lexical, r));
    if (root === undefined) throw new RolloutRejectedError("image_outside_roots", `frame path ${JSON.stringify(path)} is outside frames.roots`);
    const real = await this.#resolved(lexical, root);
    // a symlink inside a root may point anywhere: the resolved target must be inside a resolved root
    const target = await this.#rootHolding(real);
    if (target === null) throw new RolloutRejectedError("image_outside_roots", `frame path ${JSON.stringify(path)} resolves to ${real}, outside frames.roots`);
    return this.#call(target, async () => {
      try {
        const info = await stat(real);
        if (!info.isFile()) throw new RolloutRejectedError("image_missing", `frame path ${real} is not a file`);
        if (info.size > maxBytes) throw new RolloutRejectedError("image_too_large", `frame file ${real} has ${info.size} bytes, frames.maxBytes is ${maxBytes}`);
        return await readFile(real);
      } catch (cause) {
        throw cause instanceof RolloutRejectedError ? cause : frameFileFailure(cause, real);
      }
    });
  }

  /** Whether `root` is a directory now; a HostFaultError when it does not answer (a hung mount) or fails as a host
   *  does (a dead mount: ENOTCONN, ESTALE, EIO). */
  async isDirectory(root: string): Promise<boolean> {
    return this.#call(root, () => rootIsDirectory(root));
  }

  /** Stops the look at failing roots. */
  close(): void {
    if (this.#recheck) clearInterval(this.#recheck);
    this.#recheck = null;
  }

  async #resolved(lexical: string, root: string): Promise<string> {
    return this.#call(root, async () => {
      try {
        return await realpath(lexical);
      } catch (cause) {
        throw (await missingRoot(root, lexical)) ?? frameFileFailure(cause, lexical);
      }
    });
  }

  /** The root whose resolved path holds the resolved path `real`, or null. A resolved path lexically inside a root
   *  is inside that root resolved (none of its components is a link), so the roots are resolved only otherwise; a
   *  root that cannot be resolved now (hung, or failing as a host does) leaves the answer open only if no other root
   *  holds the path. */
  async #rootHolding(real: string): Promise<string | null> {
    const direct = this.roots.find((r) => inside(real, r));
    if (direct !== undefined) return direct;
    const unanswered: unknown[] = [];
    for (const root of this.roots) {
      const resolvedRoot = await this.#call(root, () => realpath(root)).catch((err: unknown) => {
        if (err instanceof HostFaultError || isTransient(err)) unanswered.push(err);
        return null; // else gone now (ENOENT): holds nothing
      });
      if (resolvedRoot !== null && inside(real, resolvedRoot)) return root;
    }
    if (unanswered.length > 0) throw unanswered[0];
    return null;
  }

  /** `call` under `root`'s bounds: its slot and one of the process's, within the deadline. */
  async #call<T>(root: string, call: () => Promise<T>): Promise<T> {
    const state = this.#roots.get(root) as RootState;
    if (state.overdue > 0) throw state.hung();
    await state.slot.acquire();
    // both shared slots held by overdue calls (now, or since this call began to wait for its root's slot): it would
    // wait behind them
    if (this.#overdue === CALLS_IN_FLIGHT) {
      state.slot.release();
      throw this.#allHung();
    }
    try {
      await this.#slots.acquire();
    } catch (err) {
      state.slot.release();
      throw err;
    }
    let overdue = false;
    const done = call().finally(() => {
      if (overdue) {
        state.overdue--;
        this.#overdue--;
      }
      this.#slots.release();
      state.slot.release();
    });
    done.then(() => this.#answered(state, null), (err: unknown) => this.#answered(state, err));
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        overdue = true;
        state.overdue++;
        this.#overdue++;
        const hung = state.hung();
        state.slot.refuseWaiting(hung);
        if (this.#overdue === CALLS_IN_FLIGHT) this.#slots.refuseWaiting(this.#allHung());
        this.#failed(state, hung.message);
        reject(hung);
      }, this.timeoutMs);
    });
    try {
      return await Promise.race([done, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** A call under `state`'s root has returned: a failure of the root (gone, dead, not answering: a HostFaultError)
   *  keeps or makes it failing; anything else — a frame read, a frame's own fault, an I/O error of one file — shows
   *  that the root answers. */
  #answered(state: RootState, err: unknown): void {
    if (err instanceof HostFaultError) this.#failed(state, err.message);
    else if (state.failure !== null && state.overdue === 0) {
      state.failure = null;
      this.#changed();
    }
  }

  #failed(state: RootState, cause: string): void {
    const changed = state.failure !== cause;
    state.failure = cause;
    // a failing root is looked at again on its own, so that it is seen to answer though no frame of it comes
    this.#recheck ??= setInterval(() => this.#lookAgain(), Math.max(1000, this.timeoutMs)).unref();
    if (changed) this.#changed();
  }

  #lookAgain(): void {
    const failing = [...this.#roots.values()].filter((r) => r.failure !== null);
    if (failing.length === 0) return this.close();
    for (const state of failing) {
      if (state.overdue > 0) continue; // its overdue call decides
      this.#call(state.root, async () => {
        if (!(await rootIsDirectory(state.root))) throw new HostFaultError(`frames root ${state.root} is not a directory now (unmounted?)`);
      }).catch(() => {});
    }
  }

  #changed(): void {
    try {
      this.onChange();
    } catch {
      // the listener's fault must not fail a frame or a timer
    }
  }

  #allHung(): HostFaultError {
    return new HostFaultError(`frames roots: every file-system call slot (${CALLS_IN_FLIGHT}) is held by a call past frames.rootTimeoutS ${this.timeoutMs / 1000} s (hung mounts?): {path} frames are read again later`);
  }
}

/** One root: a call at a time, and how many of its calls are past their deadline. */
class RootState {
  readonly slot = new Slots(1);
  overdue = 0;
  /** the host's failure of its last call, null when it answered */
  failure: string | null = null;

  constructor(readonly root: string, readonly timeoutMs: number) {}

  hung(): HostFaultError {
    return new HostFaultError(`frames root ${this.root} has not answered a file-system call within frames.rootTimeoutS ${this.timeoutMs / 1000} s (a hung mount?): its frames are read again later`);
  }
}

/** Up to `size` holders at once, the others waiting in order; the waiters can be refused all at once. By hand: the
 *  limiters on npm (p-limit and its kin) drop a cleared queue's promises unsettled instead of rejecting them. */
class Slots {
  #held = 0;
  readonly #waiting: Array<{ start(): void; refuse(err: Error): void }> = [];

  constructor(readonly size: number) {}

  async acquire(): Promise<void> {
    if (this.#held < this.size) {
      this.#held++;
      return;
    }
    await new Promise<void>((start, refuse) => this.#waiting.push({ start, refuse }));
  }

  /** The slot passes to the first waiter, if any. */
  release(): void {
    const next = this.#waiting.shift();
    if (next) next.start();
    else this.#held--;
  }

  refuseWaiting(err: Error): void {
    for (const w of this.#waiting.splice(0)) w.refuse(err);
  }
}

/** Whether `root` is a directory; a HostFaultError when it fails as a host does (ENOTCONN, ESTALE, EIO). */
async function rootIsDirectory(root: string): Promise<boolean> {
  const info = await stat(root).catch((err: unknown) => {
    if (isTransient(err)) throw new HostFaultError(`frames root ${root} cannot be looked at now: ${(err as Error).message}`, { cause: err });
    return null;
  });
  return info?.isDirectory() ?? false;
}

/** The root holding `path` is not a directory now (an unmounted share): the host's fault, not the frame's. */
async function missingRoot(root: string, path: string): Promise<HostFaultError | null> {
  const info = await stat(root).catch(() => null);
  if (info?.isDirectory()) return null;
  return new HostFaultError(`frames root ${root} is not a directory now (unmounted?): frame ${path} cannot be looked for`);
}

/**
 * A failed look at a frame file: missing (ENOENT, ENOTDIR, ENAMETOOLONG) and unreadable (EACCES, EPERM, ELOOP) are the rollout's
 * — the same file fails the same way again; anything else (EIO, EMFILE, ENOTCONN) is the host's and is thrown as it
 * is, so the message is retried later (admission.ts).
 */
export function frameFileFailure(cause: unknown, path: string): unknown {
  const code = (cause as NodeJS.ErrnoException | null)?.code;
  if (code === "ENOENT" || code === "ENOTDIR") return new RolloutRejectedError("image_missing", `frame file ${path} does not exist`, { cause });
  if (code === "ENAMETOOLONG") return new RolloutRejectedError("image_missing", `frame path ${path.slice(0, 200)}… is longer than the filesystem allows: no such file exists`, { cause });
  if (code === "EACCES" || code === "EPERM" || code === "ELOOP") return new RolloutRejectedError("image_unreadable", `frame file ${path} cannot be read (${code})`, { cause });
  return cause;
}

function inside(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
}
