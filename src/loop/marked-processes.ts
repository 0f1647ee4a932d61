// The processes a trainer command started, found by a mark in their environment. A command's workers can leave its
// process group (torchrun starts each in a session of its own, as the group kill of process-group.ts cannot reach),
// and a command killed at its time limit, or with the daemon, cannot end them: they keep the GPU, and a hung one (a
// collective that never completes) keeps it for ever, failing every later round. Every process inherits the
// environment it was started with, whatever its session, so each run of a command carries its own RUN_MARK value and
// what carries it is ended when the run is over. Linux's /proc is read; a process this user may not read is not
// ours. No library finds processes by environment: ps-list and the like list names and pids only.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { readdir, readFile, stat } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { onExit } from "signal-exit";

export const RUN_MARK = "RLLOOP_TRAINER_RUN";
const PREFIX = `${RUN_MARK}=`;

/** Marks of runs in flight: what carries them is killed if this process exits first. */
const running = new Set<string>();
let exitHook = false;

/** The mark's value in a process's environment (the NUL-separated /proc/<pid>/environ), or null. */
function markOf(environ: string): string | null {
  for (const entry of environ.split("\0")) if (entry.startsWith(PREFIX)) return entry.slice(PREFIX.length);
  return null;
}

function pids(entries: string[]): number[] {
  return entries.filter((e) => /^\d+$/.test(e)).map(Number).filter((pid) => pid !== process.pid);
}

/** This user's: a trainer runs as the daemon's user, and reading another's environment (as root) is none of ours —
 *  nor is the lock that read takes on a process stuck in a driver. stat does not take it. */
const uid = process.getuid?.() ?? -1;
/** /proc entries read at once: a host's thousands of processes must not fill libuv's pool. */
const SCAN_CONCURRENCY = 16;

/** Processes whose mark `matches`. */
export async function markedProcesses(matches: (mark: string) => boolean): Promise<number[]> {
  const found: number[] = [];
  const all = pids(await readdir("/proc").catch(() => []));
  for (let i = 0; i < all.length; i += SCAN_CONCURRENCY) {
    await Promise.all(all.slice(i, i + SCAN_CONCURRENCY).map(async (pid) => {
      const owner = await stat(`/proc/${pid}`).then((st) => st.uid, () => null);
      if (owner !== uid) return;
      const mark = markOf(await readFile(`/proc/${pid}/environ`, "latin1").catch(() => ""));
      if (mark !== null && matches(mark)) found.push(pid);
    }));
  }
  return found;
}

/** The same, synchronously: at this process's exit, where nothing asynchronous runs. */
function markedProcessesSync(matches: (mark: string) => boolean): number[] {
  let entries: string[] = [];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  return pids(entries).filter((pid) => {
    let environ = "";
    try {
      if (statSync(`/proc/${pid}`).uid !== uid) return false;
      environ = readFileSync(`/proc/${pid}/environ`, "latin1");
    } catch {
      return false; // gone, or not this user's
    }
    const mark = markOf(environ);
    return mark !== null && matches(mark);
  });
}

function signal(pids: number[], sig: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, sig);
    } catch {
      // ESRCH: it ended meanwhile
    }
  }
}

/** Keeps `mark` (a run about to start) to be ended with this process if it exits first. */
export function trackRun(mark: string): void {
  running.add(mark);
  if (!exitHook) {
    exitHook = true;
    onExit(() => {
      if (running.size > 0) signal(markedProcessesSync((m) => running.has(m)), "SIGKILL");
    });
  }
}

/** Ends what carries a mark that `matches`: SIGTERM now, SIGKILL to what is left after `graceMs`; resolves with the
 *  pids it found once they are gone (or, past SIGKILL, a second more: a process in uninterruptible sleep outlives
 *  it). Looked for again while it waits, so a process that was between fork and exec at the first look is found. */
export async function endMarked(matches: (mark: string) => boolean, graceMs: number): Promise<number[]> {
  const found = new Set<number>();
  const killAt = Date.now() + graceMs;
  for (let left = await markedProcesses(matches); left.length > 0 && Date.now() < killAt + 1000; left = await markedProcesses(matches)) {
    if (Date.now() >= killAt) signal(left, "SIGKILL");
    else signal(left.filter((pid) => !found.has(pid)), "SIGTERM"); // once each: a second SIGTERM means "now" to some
    for (const pid of left) found.add(pid);
    await sleep(100); // held: the SIGKILL must go out, even from a process otherwise idle
  }
  return [...found];
}

/** The run is over: what still carries its mark is ended, and it is no longer tracked. Resolves once they are gone,
 *  so that the next run does not start beside them on the GPU. */
export async function endRun(mark: string, graceMs: number, onFound: (pids: number[]) => void): Promise<void> {
  const found = await endMarked((m) => m === mark, graceMs).catch(() => []);
  running.delete(mark);
  if (found.length > 0) onFound(found);
}
