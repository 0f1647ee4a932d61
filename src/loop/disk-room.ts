// Whether the work directory's disk can take a training's output now. A training that cannot write its output fails
// as one whose rows break it does, and the probe's own output is as large as a round's (the same adapter and
// optimizer state): on a disk at the edge of full the probe may fit where the round just did not, or space may come
// and go, and the round's rollouts would be blamed for the host's fault. The round runner asks this before the probe
// when a training failed with an error: no room fails the probe, naming the disk; the round waits, nothing is rejected.
import { rm, statfs } from "node:fs/promises";
import { join } from "node:path";
import { writeFileAtomic } from "../files.js";
import { adapterElements } from "./adapter-files.js";
import { isDiskFault } from "./errors.js";

const MiB = 1 << 20;

/** What a training from the adapter in `parent` writes, at most: the trainer keeps LoRA weights in float32 whatever
 *  the parent's dtype (native/src/lora), and saves them with AdamW's two float32 moments per weight — 3 x 4 bytes a
 *  value — plus 4 MiB for its configuration, statistics, log-prob gaps and log. A parent it cannot read counts 0. */
export async function trainingOutputBytes(parent: string | null): Promise<number> {
  const values = parent === null ? 0 : await adapterElements(parent).catch(() => 0);
  return values * 12 + 4 * MiB;
}

/**
 * null when the file system of `dir` has `bytes` free (for `what`) and takes a write; else what is wrong. The free
 * space is what statfs gives unprivileged users (a daemon running as root could use the blocks reserved for root too:
 * counted as full, on purpose); a file system that reports no blocks at all (a FUSE one without statfs) is judged by
 * the write.
 */
export async function diskRoom(dir: string, bytes: number, what = "a training's output"): Promise<string | null> {
  const check = join(dir, ".disk-room");
  try {
    const fs = await statfs(dir);
    const free = fs.bavail * fs.bsize;
    if (fs.blocks > 0 && free < bytes) return `the work directory's disk has ${mib(free)} MiB free; ${what} needs up to ${mib(bytes)} MiB`;
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
