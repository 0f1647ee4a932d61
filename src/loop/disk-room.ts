// Whether the work directory's disk can take a training's output now. A training that cannot write its output fails
// as one whose rows break it does, and the probe's own output is as large as a round's (the same adapter and
// optimizer state): on a disk at the edge of full the probe may fit where the round just did not, or space may come
// and go, and the round's rollouts would be blamed for the host's fault. The probe (probe.ts) asks this first, and
// fails with the answer: the trainer's host is at fault, the round waits, nothing is rejected.
import { rm, stat, statfs } from "node:fs/promises";
import { join } from "node:path";
import { writeFileAtomic } from "../files.js";
import { ADAPTER_WEIGHTS } from "./adapter-files.js";
import { isDiskFault } from "./errors.js";

const MiB = 1 << 20;

/** What a training from `adapter` writes, at most: an adapter of the same size, its optimizer state (two float32
 *  moments per weight: up to 4x a bfloat16 adapter), and 4 MiB for its configuration, statistics and log. */
export async function trainingOutputBytes(adapter: string): Promise<number> {
  const weights = await stat(join(adapter, ADAPTER_WEIGHTS)).then((s) => s.size, () => 0);
  return 5 * weights + 4 * MiB;
}

/** null when the file system of `dir` has `bytes` free for this process and takes a write; else what is wrong. */
export async function diskRoom(dir: string, bytes: number): Promise<string | null> {
  const check = join(dir, ".disk-room");
  try {
    const fs = await statfs(dir);
    const free = fs.bavail * fs.bsize;
    if (free < bytes) return `the work directory's disk has ${mib(free)} MiB free; a training's output needs up to ${mib(bytes)} MiB`;
    await writeFileAtomic(check, "x"); // read-only, over quota, failing: statfs does not say
    return null;
  } catch (err) {
    if (isDiskFault(err)) return `the work directory's disk refuses a write: ${(err as Error).message}`;
    throw err;
  } finally {
    await rm(check, { force: true }).catch(() => {});
  }
}

const mib = (bytes: number) => (bytes / MiB).toFixed(1);
