// A command run in a process group of its own (execa's `detached`), ended as a group. A trainer command is often a
// wrapper (a shell script, accelerate) whose workers are its children: a kill of the command alone leaves them
// running on the GPU. So the group is ended when the command exits or its time is up (SIGTERM, SIGKILL after a
// grace), and any group still running when this process exits is killed, as execa's own clean-up does for a command
// that is not detached (a detached one it leaves alone) — through signal-exit, as execa does, so that an exit by a
// signal nothing handles (`rlloop replay --train` sent SIGTERM) counts too, while a signal the daemon handles (its
// drain, which lets the training in flight finish) does not. Workers that start sessions of their own (torchrun's)
// are out of the group's reach: marked-processes.ts ends those, by the mark in their environment.
import { onExit } from "signal-exit";

/** Between a group's SIGTERM and its SIGKILL. */
export const GROUP_KILL_GRACE_MS = 5000;

/** groups to kill at this process's exit; of them, those sent SIGTERM already */
const running = new Set<number>();
const ending = new Set<number>();
let exitHook = false;

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: no process is left in the group
  }
}

/** Keeps `pgid` (a detached child's pid: its group's id) to be killed if this process exits first. */
export function trackGroup(pgid: number | undefined): void {
  if (pgid === undefined) return;
  running.add(pgid);
  if (!exitHook) {
    exitHook = true;
    onExit(() => {
      for (const id of running) signalGroup(id, "SIGKILL");
    });
  }
}

/** SIGTERM to every process of the group now, SIGKILL to what is left after the grace (or at this process's exit,
 *  if that comes first). Once per group. */
export function endGroup(pgid: number | undefined): void {
  if (pgid === undefined || ending.has(pgid) || !running.has(pgid)) return;
  ending.add(pgid);
  signalGroup(pgid, "SIGTERM");
  setTimeout(() => {
    running.delete(pgid);
    ending.delete(pgid);
    signalGroup(pgid, "SIGKILL");
  }, GROUP_KILL_GRACE_MS).unref();
}
