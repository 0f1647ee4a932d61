// A command run in a process group of its own (execa's `detached`), ended as a group. A trainer command is often a
// wrapper (a shell script, torchrun, accelerate) whose workers are its children: a kill of the command alone leaves
// them running, on the GPU and holding the output pipe, and execa's result waits for that pipe's end — a timed-out
// job would never end, nor the round, nor the stream behind it. So the group is ended when the command exits or its
// time is up (SIGTERM, SIGKILL after a grace), and any group still running when this process exits is killed, as
// execa's own clean-up does for a command that is not detached (a detached one it leaves alone).

/** Between a group's SIGTERM and its SIGKILL. */
export const GROUP_KILL_GRACE_MS = 5000;

const running = new Set<number>();
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
    process.once("exit", () => {
      for (const id of running) signalGroup(id, "SIGKILL");
    });
  }
}

/** SIGTERM to every process of the group now, SIGKILL to what is left after the grace. */
export function endGroup(pgid: number | undefined): void {
  if (pgid === undefined || !running.delete(pgid)) return;
  signalGroup(pgid, "SIGTERM");
  setTimeout(() => signalGroup(pgid, "SIGKILL"), GROUP_KILL_GRACE_MS).unref();
}
