// The daemon's resident trainer: a RoundTrainer over src/train's ResidentTrainer, so the rank processes keep the
// base model loaded between rounds instead of starting `rlloop train ppo` (and loading the model) per job. Jobs are
// the contract's TrainJob, built from the typed trainer config (round-job.ts) and taken by the ranks as they are;
// relative frame paths resolve against the job's `image_base`.
// Failures: bad input (a row, a frame) fails the job and keeps the ranks; a rank that dies, a rank that fails while
// its peers wait in a collective, or a job past trainer.timeoutS ends the ranks, and the next job starts new ones
// (the model loads again). Ranks that do not start within trainer.startTimeoutS are killed.
import { rm } from "node:fs/promises";
import type { Logger } from "pino";
import type { PpoStats, TrainJob } from "../contract/index.js";
import { logger } from "../log.js";
import { checkRows, resolveModel } from "../train/job-inputs.js";
import { ResidentTrainer } from "../train/resident.js";
import type { TrainerConfig } from "./config/index.js";
import { TrainerError } from "./errors.js";
import { readTrainerOutput, type RoundTrainer, type TrainRun } from "./trainer.js";

export class ResidentRoundTrainer implements RoundTrainer {
  readonly #config: TrainerConfig;
  readonly #log: Logger;
  #ranks: Promise<ResidentTrainer> | null = null;
  #closed = false;

  constructor(config: TrainerConfig, log: Logger = logger("trainer")) {
    this.#config = config;
    this.#log = log;
  }

  /** Starts the ranks and loads the model now (otherwise the first job does); rejects if they cannot start. */
  async start(): Promise<void> {
    await this.#trainer();
  }

  async train(job: TrainJob, run: TrainRun): Promise<PpoStats> {
    try {
      await checkRows(job);
    } catch (cause) {
      throw new TrainerError(`resident trainer: ${run.label}: ${(cause as Error).message}`, { cause });
    }
    const trainer = await this.#trainer();
    await rm(job.out, { recursive: true, force: true });
    const timeoutS = this.#config.timeoutS;
    const timer = timeoutS === null ? null : setTimeout(() => trainer.kill(new Error(`ran past trainer.timeoutS (${timeoutS} s)`)), timeoutS * 1000);
    try {
      await trainer.run(job);
    } catch (cause) {
      const restart = trainer.failure !== null ? " (ranks ended; the next job starts new ones)" : "";
      throw new TrainerError(`resident trainer failed on ${run.label}: ${(cause as Error).message}${restart}`, { cause });
    } finally {
      if (timer !== null) clearTimeout(timer);
    }
    return readTrainerOutput(job.out);
  }

  /** Process ids of the running ranks, by rank; empty while none run (not started yet, or ended). */
  async rankPids(): Promise<number[]> {
    const trainer = await this.#ranks?.catch(() => null);
    return trainer && trainer.failure === null ? trainer.pids : [];
  }

  /** Stops the ranks (after the job in flight, if any; ranks that do not exit `graceMs` after the stop are killed);
   *  later jobs fail. */
  async close(graceMs?: number): Promise<void> {
    this.#closed = true;
    const trainer = await this.#ranks?.catch(() => null);
    await trainer?.stop(graceMs);
  }

  /** The running ranks, or new ones when there are none or they ended. Calls chain, so one start at a time. */
  #trainer(): Promise<ResidentTrainer> {
    if (this.#closed) return Promise.reject(new TrainerError("resident trainer: closed"));
    const previous = this.#ranks;
    const next = (async () => {
      const current = previous === null ? null : await previous.catch(() => null);
      if (current !== null && current.failure === null) return current;
      if (current !== null) await current.exitedAfterKill(); // failed ranks are being killed: new ones start after
      if (this.#closed) throw new TrainerError("resident trainer: closed");
      return this.#start();
    })();
    this.#ranks = next;
    next.catch(() => {
      if (this.#ranks === next) this.#ranks = null;
    });
    return next;
  }

  async #start(): Promise<ResidentTrainer> {
    const c = this.#config;
    try {
      const choice = { model: c.model ?? "", device: c.device, dtype: c.dtype, checkpointing: c.checkpointing, tf32: c.tf32, attention: c.attention, gpus: c.gpus };
      const { model, ranks } = await resolveModel(choice, { ...process.env, ...c.env }, "trainer.model");
      return await ResidentTrainer.start({ model, ranks, env: c.env, log: this.#log, startTimeoutMs: c.startTimeoutS * 1000 });
    } catch (cause) {
      throw new TrainerError(`resident trainer: cannot start the ranks: ${(cause as Error).message}`, { cause });
    }
  }
}
