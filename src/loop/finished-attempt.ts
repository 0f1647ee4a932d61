// A killed daemon's training that had finished. Each attempt trains into rounds/<round>/adapter.tmp-<pid>-<attempt>/
// and the trainer writes stats.json last (rlloop's atomically; the seed's after the adapter and optimizer state),
// so a folder of the manifest's last attempt with a readable stats record and the adapter files is a complete
// result: the restarted daemon gates and commits it instead of training the round again (minutes of GPU time) or,
// when that attempt was the last one allowed, failing a round that trained.
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import type { PpoStats } from "../contract/index.js";
import { readTrainerOutput } from "./trainer.js";

const ATTEMPT_DIR = /^adapter\.tmp-\d+-(\d+)$/;

/** The finished output of `attempt` in the round folder `dir`, or null when no folder of it is complete. */
export async function findFinishedAttempt(dir: string, attempt: number): Promise<{ outDir: string; stats: PpoStats } | null> {
  const names = await readdir(dir).catch(() => [] as string[]);
  for (const name of names) {
    if (Number(ATTEMPT_DIR.exec(name)?.[1]) !== attempt) continue;
    const outDir = join(dir, name);
    const stats = await readTrainerOutput(outDir).catch(() => null);
    if (stats) return { outDir, stats };
  }
  return null;
}
