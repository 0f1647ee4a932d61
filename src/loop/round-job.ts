// The trainer job of a round (or of a probe, or of a part of a round being isolated): the contract's TrainJob
// built from the typed trainer config, so the ranks take it as it is. Frame paths in the rows are relative to the
// job's folder (`image_base`), where a one-shot trainer also runs.
import { readdir, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import type { TrainJob } from "../contract/index.js";
import type { TrainerConfig } from "./config/index.js";

export interface JobFiles {
  /** the folder the rows' frame paths are relative to (a round folder, the probe folder) */
  dir: string;
  /** rows file, inside `dir` */
  data: string;
  /** adapter to continue (with its optimizer state when present) */
  adapter: string;
  /** frozen reference adapter of the KL term */
  ref: string;
  /** where the new adapter, optimizer state and stats.json go */
  out: string;
  seed: number;
}

export function roundJob(trainer: TrainerConfig, files: JobFiles): TrainJob {
  return {
    kind: "ppo",
    data: files.data,
    image_base: files.dir,
    valid: null,
    adapter: files.adapter,
    ref: files.ref,
    out: files.out,
    epochs: trainer.epochs,
    lr: trainer.lr,
    batch: trainer.batch,
    accumulation: trainer.accumulation,
    max_updates: null,
    seed: files.seed,
    prompt: trainer.prompt,
    tis_cap: trainer.tisCap,
    mismatch_stats: trainer.mismatchStats,
  };
}

/** The output folder of one attempt at a round: adapter.tmp-<pid>-<attempt> (finished-attempt.ts reads the name). */
export const attemptOutDir = (roundDir: string, attempt: number) => join(roundDir, `adapter.tmp-${process.pid}-${attempt}`);

/**
 * Removes a job's output folder and what a trainer left beside it while writing it: the native trainer saves into a
 * sibling `<out>.tmp-<pid>-<n>` and renames it (native/src/io/files.cpp), so a save the disk refused leaves its part
 * there, not in `out` (the test double writes `<out>.writing`). On a full disk that part holds the space it lacked.
 */
export async function removeJobOutput(out: string): Promise<void> {
  const prefix = `${basename(out)}.`;
  const beside = await readdir(dirname(out)).catch(() => [] as string[]);
  await Promise.all([out, ...beside.filter((n) => n.startsWith(prefix)).map((n) => join(dirname(out), n))].map((p) => rm(p, { recursive: true, force: true })));
}
