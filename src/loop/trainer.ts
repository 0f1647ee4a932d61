// What the daemon needs from a trainer (DESIGN.md data flow step 5), and the implementation that runs the one-shot
// CLI `rlloop train ppo` per round. The resident trainer (model kept on the GPU between rounds) implements the same
// interface; the daemon never touches tensors either way.
import { access, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { execa } from "execa";
import { PACKAGE_ROOT, type Config } from "./config.js";
import { TrainerError } from "./errors.js";
import { writeFileAtomic } from "../files.js";
import { PpoStats } from "./schema.js";

export type { PpoStats } from "./schema.js";

export interface TrainJob {
  round: number;
  /** the round folder; the trainer runs with it as working directory (train.jsonl's image paths are relative) */
  roundDir: string;
  trainJsonl: string;
  /** adapter to continue (with its optimizer state when present) */
  parentAdapter: string;
  /** frozen reference adapter for the KL term */
  refAdapter: string;
  /** where the new adapter, optimizer state and stats.json go (adapter.tmp/, renamed by the daemon) */
  outDir: string;
  seed: number;
  /** 1-based attempt number (the daemon retries up to trainer.maxAttempts) */
  attempt: number;
}

export interface RoundTrainer {
  train(job: TrainJob): Promise<PpoStats>;
  close(): Promise<void>;
}

/** Files a PEFT adapter dir must hold for the daemon to accept and publish it. */
export const ADAPTER_FILES = ["adapter_config.json", "adapter_model.safetensors"] as const;
export const STATS_FILE = "stats.json";

/** The default trainer command: this package's CLI. */
export function defaultTrainerCommand(): string[] {
  return [process.execPath, join(PACKAGE_ROOT, "bin", "rlloop.js"), "train", "ppo"];
}

/** Runs `<trainer.command> --data --adapter --ref --out --seed [--model] <trainer.args>` once per round. */
export class CliRoundTrainer implements RoundTrainer {
  constructor(private readonly config: Config["trainer"]) {}

  async train(job: TrainJob): Promise<PpoStats> {
    const [file, ...prefix] = this.config.command ?? defaultTrainerCommand();
    const args = [
      ...prefix,
      "--data", job.trainJsonl, "--adapter", job.parentAdapter, "--ref", job.refAdapter,
      "--out", job.outDir, "--seed", String(job.seed),
      ...this.config.args,
    ];
    await rm(job.outDir, { recursive: true, force: true });
    const result = await execa(file as string, args, {
      cwd: job.roundDir,
      env: this.config.env,
      all: true,
      reject: false,
      timeout: this.config.timeoutS === null ? undefined : this.config.timeoutS * 1000,
      forceKillAfterDelay: 5000,
    });
    await writeFileAtomic(join(job.roundDir, `trainer.${job.attempt}.log`), result.all ?? "");
    if (result.failed) {
      const tail = (result.all ?? "").split("\n").slice(-15).join("\n");
      throw new TrainerError(`trainer failed on round ${job.round} (attempt ${job.attempt}): ${result.shortMessage}\n${tail}`);
    }
    return readTrainerOutput(job.outDir);
  }

  async close(): Promise<void> {}
}

/** Validate the trainer's output dir and read its stats.json. */
export async function readTrainerOutput(outDir: string): Promise<PpoStats> {
  for (const name of ADAPTER_FILES) {
    try {
      await access(join(outDir, name));
    } catch (cause) {
      throw new TrainerError(`trainer output ${outDir} lacks ${name}`, { cause });
    }
  }
  let text: string;
  try {
    text = await readFile(join(outDir, STATS_FILE), "utf8");
  } catch (cause) {
    throw new TrainerError(`trainer output ${outDir} lacks ${STATS_FILE}`, { cause });
  }
  const parsed = PpoStats.safeParse(parseStatsJson(text));
  if (!parsed.success) throw new TrainerError(`${join(outDir, STATS_FILE)} is not a stats record: ${parsed.error.issues[0]?.message}`);
  return parsed.data;
}

/** Python's json.dumps writes NaN / Infinity / -Infinity bare; JSON.parse refuses them, the gate must see them. */
export function parseStatsJson(text: string): unknown {
  const quoted = text.replace(/(-?)\b(NaN|Infinity)\b/g, '"$1$2"');
  try {
    return JSON.parse(quoted, (_key, value: unknown) => {
      if (value === "NaN") return Number.NaN;
      if (value === "Infinity") return Number.POSITIVE_INFINITY;
      if (value === "-Infinity") return Number.NEGATIVE_INFINITY;
      return value;
    });
  } catch (cause) {
    throw new TrainerError(`stats.json is not JSON: ${(cause as Error).message}`, { cause });
  }
}
