// The daemon's resident trainer: a RoundTrainer (trainer.ts) over src/train's ResidentTrainer, so the rank processes
// keep the base model loaded between rounds instead of starting `rlloop train ppo` (and loading the model) per round.
// A round is the same run CliRoundTrainer starts, from the same flags: `--data --adapter --ref --out --seed` of the
// round followed by trainer.args (`--model` is required there; `--gpus --device --dtype --checkpointing` fix the
// ranks for the trainer's life, the others apply per round). Relative frame paths of train.jsonl resolve against
// the round folder, as they do for the CLI trainer running there.
// Failures: bad input (a flag, a row, a frame) fails the attempt and keeps the ranks; a rank that dies, a rank that
// fails while its peers wait in a collective, or a round past trainer.timeoutS ends the ranks, and the next attempt
// starts new ones (the model loads again).
import { rm } from "node:fs/promises";
import type { Logger } from "pino";
import { logger } from "../log.js";
import { checkRows, parseTrainFlags, resolveJob, resolveModel } from "../train/command.js";
import type { TrainJob as RankJob } from "../train/job.js";
import { ResidentTrainer } from "../train/resident.js";
import { TrainerError } from "./errors.js";
import { readTrainerOutput, type PpoStats, type RoundTrainer, type TrainJob } from "./trainer.js";

export interface ResidentRoundTrainerOptions {
  /** trainer.args: flags of `rlloop train ppo`, --model required (paths absolute or relative to the daemon's cwd) */
  args: string[];
  /** trainer.env: extra environment of the rank processes, e.g. CUDA_VISIBLE_DEVICES */
  env?: Record<string, string>;
  /** trainer.timeoutS: a round running longer fails its attempt and the ranks are restarted; null = no limit */
  timeoutS?: number | null;
  log?: Logger;
}

export class ResidentRoundTrainer implements RoundTrainer {
  readonly #args: string[];
  readonly #env: Record<string, string>;
  readonly #timeoutS: number | null;
  readonly #log: Logger;
  #ranks: Promise<ResidentTrainer> | null = null;
  #closed = false;

  constructor({ args, env = {}, timeoutS = null, log = logger("trainer") }: ResidentRoundTrainerOptions) {
    this.#args = [...args];
    this.#env = { ...env };
    this.#timeoutS = timeoutS;
    this.#log = log;
  }

  /** Starts the ranks and loads the model now (otherwise the first round does); rejects if they cannot start. */
  async start(): Promise<void> {
    await this.#trainer();
  }

  async train(job: TrainJob): Promise<PpoStats> {
    const what = `round ${job.round} (attempt ${job.attempt})`;
    const rankJob = await this.#rankJob(job).catch((cause: Error) => {
      throw new TrainerError(`resident trainer: ${what}: ${cause.message}`, { cause });
    });
    const trainer = await this.#trainer();
    await rm(job.outDir, { recursive: true, force: true });
    const timer = this.#timeoutS === null ? null : setTimeout(() => {
      trainer.kill(new Error(`ran past trainer.timeoutS (${this.#timeoutS} s)`));
    }, this.#timeoutS * 1000);
    try {
      await trainer.run(rankJob);
    } catch (cause) {
      const restart = trainer.failure !== null ? " (ranks ended; the next attempt starts new ones)" : "";
      throw new TrainerError(`resident trainer failed on ${what}: ${(cause as Error).message}${restart}`, { cause });
    } finally {
      if (timer !== null) clearTimeout(timer);
    }
    return readTrainerOutput(job.outDir);
  }

  /** Process ids of the running ranks, by rank; empty while none run (not started yet, or ended). */
  async rankPids(): Promise<number[]> {
    const trainer = await this.#ranks?.catch(() => null);
    return trainer && trainer.failure === null ? trainer.pids : [];
  }

  /** Stops the ranks (after the round in flight, if any); later rounds fail. */
  async close(): Promise<void> {
    this.#closed = true;
    const trainer = await this.#ranks?.catch(() => null);
    await trainer?.stop();
  }

  /** The round as a job of the ranks: the CLI trainer's flags, parsed and checked the same way. */
  async #rankJob(job: TrainJob): Promise<RankJob> {
    const flags = [
      "--data", job.trainJsonl, "--adapter", job.parentAdapter, "--ref", job.refAdapter,
      "--out", job.outDir, "--seed", String(job.seed), ...this.#args,
    ];
    const rankJob = await resolveJob("ppo", parseTrainFlags("ppo", flags), job.roundDir);
    await checkRows(rankJob);
    return rankJob;
  }

  /** The running ranks, or new ones when there are none or they ended. Calls chain, so one start at a time. */
  #trainer(): Promise<ResidentTrainer> {
    if (this.#closed) return Promise.reject(new TrainerError("resident trainer: closed"));
    const previous = this.#ranks;
    const next = (async () => {
      const current = previous === null ? null : await previous.catch(() => null);
      if (current !== null && current.failure === null) return current;
      if (current !== null) await current.closed;
      return this.#start();
    })();
    this.#ranks = next;
    next.catch(() => {
      if (this.#ranks === next) this.#ranks = null;
    });
    return next;
  }

  async #start(): Promise<ResidentTrainer> {
    try {
      const { model, ranks } = await resolveModel(parseTrainFlags("ppo", this.#args, false), { ...process.env, ...this.#env });
      return await ResidentTrainer.start({ model, ranks, env: this.#env, log: this.#log });
    } catch (cause) {
      throw new TrainerError(`resident trainer: cannot start the ranks: ${(cause as Error).message}`, { cause });
    }
  }
}
