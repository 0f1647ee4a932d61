// Frames by {path}: read under the configured roots, each root's file-system calls bounded. A root on a network
// mount that stops answering (an NFS server gone, a FUSE daemon hung) blocks the thread of every call into it for as
// long as the mount hangs: a synchronous call would block the event loop (intake, lease renewals, every other
// rollout), an asynchronous one takes one of libuv's threads (4, shared with decoding and every file write). So the
// calls under one root run at most ROOT_CONCURRENCY at a time, each with a deadline (frames.rootTimeoutS). A call
// past it fails its frame as the host's fault (the rollout is judged again later, never rejected for it), and the
// root counts as hung: its frames fail at once, without a call, until every overdue call has returned. A hung root
// thus holds at most ROOT_CONCURRENCY threads, and nothing else waits on it.
import { readFile, realpath, stat } from "node:fs/promises";
import { isAbsolute, resolve, sep } from "node:path";
import { HostFaultError, RolloutRejectedError } from "./errors.js";

/** Calls in flight under one root: enough to overlap a network mount's round trips, few enough that a hung mount
 *  leaves most of libuv's pool to the rest of the daemon. */
const ROOT_CONCURRENCY = 2;

export class FrameRoots {
  readonly #calls: Map<string, RootCalls>;

  /** `roots`: absolute paths; `timeoutMs`: the deadline of one file-system call under a root. */
  constructor(readonly roots: readonly string[], timeoutMs = 10_000) {
    this.#calls = new Map(roots.map((root) => [root, new RootCalls(root, timeoutMs)]));
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

  /** Whether `root` is a directory now; a HostFaultError when it does not answer (a hung mount). */
  async isDirectory(root: string): Promise<boolean> {
    return this.#call(root, async () => (await stat(root).catch(() => null))?.isDirectory() ?? false);
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
   *  is inside that root resolved (none of its components is a link), so the roots are resolved only otherwise. */
  async #rootHolding(real: string): Promise<string | null> {
    const direct = this.roots.find((r) => inside(real, r));
    if (direct !== undefined) return direct;
    for (const root of this.roots) {
      const resolvedRoot = await this.#call(root, () => realpath(root)).catch((err: unknown) => {
        if (err instanceof HostFaultError) throw err;
        return root; // a root that is gone now holds nothing
      });
      if (inside(real, resolvedRoot)) return root;
    }
    return null;
  }

  #call<T>(root: string, call: () => Promise<T>): Promise<T> {
    return (this.#calls.get(root) as RootCalls).run(call);
  }
}

/** One root's calls: at most ROOT_CONCURRENCY at once, each with a deadline; none while one is overdue. */
class RootCalls {
  #running = 0;
  #overdue = 0;
  readonly #waiting: Array<{ start(): void; refuse(err: Error): void }> = [];

  constructor(readonly root: string, readonly timeoutMs: number) {}

  async run<T>(call: () => Promise<T>): Promise<T> {
    await this.#slot();
    let overdue = false;
    const done = call().finally(() => {
      if (overdue) this.#overdue--;
      const next = this.#waiting.shift();
      if (next) next.start(); // the slot passes on
      else this.#running--;
    });
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        overdue = true;
        this.#overdue++;
        const err = this.#hung();
        for (const w of this.#waiting.splice(0)) w.refuse(err);
        reject(err);
      }, this.timeoutMs);
    });
    try {
      return await Promise.race([done, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  async #slot(): Promise<void> {
    if (this.#overdue > 0) throw this.#hung();
    if (this.#running < ROOT_CONCURRENCY) {
      this.#running++;
      return;
    }
    // the finishing call hands its slot over (#running stays), or a call gone overdue refuses every waiter
    await new Promise<void>((start, refuse) => this.#waiting.push({ start, refuse }));
  }

  #hung(): HostFaultError {
    return new HostFaultError(`frames root ${this.root} has not answered a file-system call within frames.rootTimeoutS ${this.timeoutMs / 1000} s (a hung mount?): its frames are read again later`);
  }
}

/** The root holding `path` is not a directory now (an unmounted share): the host's fault, not the frame's. */
async function missingRoot(root: string, path: string): Promise<HostFaultError | null> {
  const info = await stat(root).catch(() => null);
  if (info?.isDirectory()) return null;
  return new HostFaultError(`frames root ${root} is not a directory now (unmounted?): frame ${path} cannot be looked for`);
}

/**
 * A failed look at a frame file: missing (ENOENT, ENOTDIR) and unreadable (EACCES, EPERM, ELOOP) are the rollout's
 * — the same file fails the same way again; anything else (EIO, EMFILE, ENOTCONN) is the host's and is thrown as it
 * is, so the message is retried later (admission.ts).
 */
export function frameFileFailure(cause: unknown, path: string): unknown {
  const code = (cause as NodeJS.ErrnoException | null)?.code;
  if (code === "ENOENT" || code === "ENOTDIR") return new RolloutRejectedError("image_missing", `frame file ${path} does not exist`, { cause });
  if (code === "EACCES" || code === "EPERM" || code === "ELOOP") return new RolloutRejectedError("image_unreadable", `frame file ${path} cannot be read (${code})`, { cause });
  return cause;
}

function inside(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
}
