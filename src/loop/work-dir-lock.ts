// One daemon per work directory: an exclusive lock file `<workDir>/daemon.lock` taken before recovery (which
// empties incoming/ and removes partial round folders a running daemon still needs). The file names its holder
// (pid, the process's start time from /proc, host); a lock whose holder is gone — a SIGKILLed daemon — is stale and
// taken over at once. Written by hand: the lock libraries on npm judge staleness by mtime (a restart after a kill
// would wait for it to age), and flock(2) is not reachable from Node without a native addon.
// Known limit: two daemons that find the same stale lock at the same instant can both take it; the state record's
// compare-and-set still refuses the second writer.
import { readFileSync } from "node:fs";
import { mkdir, open, readFile, rm, stat } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { WorkDirLockedError } from "./errors.js";

interface Holder {
  pid: number;
  /** /proc/<pid>/stat start time (clock ticks since boot): tells a reused pid from the holder */
  start: string | null;
  host: string;
  since: string;
}

export interface WorkDirLock {
  readonly file: string;
  release(): Promise<void>;
}

export async function lockWorkDir(workDir: string): Promise<WorkDirLock> {
  await mkdir(workDir, { recursive: true });
  const file = join(workDir, "daemon.lock");
  const me: Holder = { pid: process.pid, start: processStart(process.pid), host: hostname(), since: new Date().toISOString() };
  for (let tries = 0; tries < 2; tries++) {
    try {
      await writeHolder(file, me);
      return { file, release: () => rm(file, { force: true }) };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    const holder = await readHolder(file);
    if (holder && alive(holder)) {
      throw new WorkDirLockedError(
        `work dir ${workDir} is in use by the daemon with pid ${holder.pid} on ${holder.host} (since ${holder.since}): stop it first, or give this one another workDir (lock: ${file})`,
      );
    }
    await rm(file, { force: true }); // stale: its holder is gone
  }
  throw new WorkDirLockedError(`work dir ${workDir}: could not take ${file} (another daemon is starting on it?)`);
}

/** Creates the lock file naming `me`; one it could not finish (a full disk refuses the write) is removed again, so a
 *  later start does not have to judge a half-written lock, and its descriptor is closed whatever happened. */
async function writeHolder(file: string, me: Holder): Promise<void> {
  const handle = await open(file, "wx");
  try {
    await handle.writeFile(JSON.stringify(me));
    await handle.sync();
  } catch (err) {
    // ours only: another daemon that judged the half-written file stale may have made its own there meanwhile
    const [mine, there] = await Promise.all([handle.stat(), stat(file)]).catch(() => [null, null]);
    if (mine !== null && there !== null && mine.ino === there.ino) await rm(file, { force: true }).catch(() => {});
    throw err;
  } finally {
    await handle.close().catch(() => {});
  }
}

async function readHolder(file: string): Promise<Holder | null> {
  try {
    return JSON.parse(await readFile(file, "utf8")) as Holder;
  } catch {
    return null; // unreadable or half-written by a daemon killed while writing it: stale
  }
}

/** The holder still runs: same host (another host's process cannot be checked: assume alive), same pid and start. */
function alive(holder: Holder): boolean {
  if (holder.host !== hostname()) return true;
  try {
    process.kill(holder.pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
  return holder.start === null || processStart(holder.pid) === holder.start;
}

/** Field 22 of /proc/<pid>/stat (start time); null where /proc is not available. */
function processStart(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // the command name (field 2) is in parentheses and may hold spaces: count fields after its closing one
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? null;
  } catch {
    return null;
  }
}
