// What the daemon needs from a trainer (DESIGN.md data flow step 5) and how it reads a trainer's output. Two
// implementations: the resident trainer (resident-trainer.ts, the model kept loaded between rounds) and a one-shot
// command per job (cli-trainer.ts). The daemon never touches tensors either way.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { decodeStats, type PpoStats, type TrainJob } from "../contract/index.js";
import { ADAPTER_CONFIG, ADAPTER_WEIGHTS, AdapterFileError, checkAdapterFiles } from "./adapter-files.js";
import { TrainerError } from "./errors.js";
import { nonFiniteStat } from "./gate.js";

export interface TrainRun {
  /** names the run in logs and its log file: `round 3 attempt 2`, `probe`, `round 3 part 5` */
  label: string;
  /** where a one-shot trainer's output is kept (the resident ranks log through the daemon) */
  logFile: string;
}

export interface RoundTrainer {
  /** Everything a job needs that can be checked before one (the command, the model, the ranks started). */
  start(): Promise<void>;
  /** Runs one job; resolves with its stats.json, or rejects with a TrainerError. */
  train(job: TrainJob, run: TrainRun): Promise<PpoStats>;
  close(): Promise<void>;
}

/** Files a PEFT adapter dir must hold for the daemon to accept and publish it. */
export const ADAPTER_FILES = [ADAPTER_CONFIG, ADAPTER_WEIGHTS] as const;
export const STATS_FILE = "stats.json";

/** Validate the trainer's output dir and read its stats.json (the contract's codec: NaN stays NaN). An adapter that
 *  is torn or holds NaN fails the job (adapter-files.ts): the probe then tells a broken trainer from rows that make
 *  it diverge, which are isolated as any rows that fail training. */
export async function readTrainerOutput(outDir: string): Promise<PpoStats> {
  // stats.json first: it is written last, and small (an unfinished folder is told without reading the adapter)
  let text: string;
  try {
    text = await readFile(join(outDir, STATS_FILE), "utf8");
  } catch (cause) {
    throw new TrainerError(`trainer output ${outDir} lacks ${STATS_FILE}`, { cause });
  }
  let stats: PpoStats;
  try {
    stats = decodeStats(text);
  } catch (cause) {
    throw new TrainerError(`${join(outDir, STATS_FILE)} is not a stats record: ${(cause as Error).message.split("\n")[0]}`, { cause });
  }
  let nonFinite: string | null;
  try {
    nonFinite = await checkAdapterFiles(outDir);
  } catch (cause) {
    if (!(cause instanceof AdapterFileError)) throw cause;
    throw new TrainerError(`trainer output ${outDir}: ${cause.message}`, { cause });
  }
  // non-finite statistics say it first, and are judged as such (round-runner.ts): NaN weights are news only after
  // finite statistics
  if (nonFinite !== null && nonFiniteStat(stats) === null) throw new TrainerError(`trainer output ${outDir}: ${nonFinite}`);
  return stats;
}
