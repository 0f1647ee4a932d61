// A one-shot trainer command per job: `rlloop train ppo` (trainer.resident false) or a custom trainer.command such
// as the seed. It gets the seed's flags (plus, for rlloop's own command, the model flags of the typed trainer
// config), runs with the job's folder as working directory (the rows' frame paths are relative to it), and must
// write the adapter and stats.json into --out.
import { randomUUID } from "node:crypto";
import { access, constants, open, rm } from "node:fs/promises";
import { delimiter, isAbsolute, join } from "node:path";
import { execa } from "execa";
import type { TrainJob } from "../contract/index.js";
import { PACKAGE_ROOT, type TrainerConfig } from "./config/index.js";
import { TrainerError } from "./errors.js";
import { logger } from "../log.js";
import { endMarked, endRun, RUN_MARK, trackRun } from "./marked-processes.js";
import { endGroup, GROUP_KILL_GRACE_MS, trackGroup } from "./process-group.js";
import { readTrainerOutput, type RoundTrainer, type TrainRun } from "./trainer.js";
import type { PpoStats } from "../contract/index.js";

/** The default trainer command: this package's CLI. */
export function defaultTrainerCommand(): string[] {
  return [process.execPath, join(PACKAGE_ROOT, "bin", "rlloop.js"), "train", "ppo"];
}

/** The seed's flags of a PPO job (bt_train.py accepts exactly these). */
export function seedFlags(job: TrainJob): string[] {
  return [
    "--data", job.data, "--adapter", job.adapter ?? "", "--ref", job.ref ?? "", "--out", job.out,
    "--epochs", String(job.epochs), "--lr", String(job.lr), "--batch", String(job.batch),
    "--accumulation", String(job.accumulation), "--seed", String(job.seed),
  ];
}

/** `rlloop train ppo`'s own flags beyond the seed's, from the typed trainer config and the job. */
export function rlloopFlags(job: TrainJob, trainer: TrainerConfig): string[] {
  const flags = ["--model", trainer.model ?? "", "--checkpointing", trainer.checkpointing, "--tf32", trainer.tf32, "--attention", trainer.attention];
  const optional: Array<[string, string | number | null]> = [
    ["--device", trainer.device], ["--dtype", trainer.dtype], ["--gpus", trainer.gpus], ["--prompt", job.prompt], ["--tis-cap", job.tis_cap],
  ];
  for (const [flag, value] of optional) if (value !== null) flags.push(flag, String(value));
  if (job.mismatch_stats) flags.push("--mismatch-stats");
  return flags;
}

export class CliRoundTrainer implements RoundTrainer {
  readonly #custom: boolean;
  readonly #command: string[];
  readonly #log = logger("trainer");

  /** `owner`: the marks of this trainer's runs begin with it (marked-processes.ts). A daemon's names its work dir, so
   *  that its start ends what the runs of a daemon killed there left behind (the work dir's lock is held: that
   *  daemon is gone); other owners' runs are left alone. */
  constructor(private readonly config: TrainerConfig, private readonly owner: { mark: string; endLeftovers: boolean } = { mark: "run", endLeftovers: false }) {
    this.#custom = config.command !== null;
    this.#command = config.command ?? defaultTrainerCommand();
  }

  /** The command must be runnable: an executable file, or a name found on PATH. */
  async start(): Promise<void> {
    const file = this.#command[0] as string;
    if (!(await executable(file))) {
      throw new TrainerError(`trainer.command ${JSON.stringify(file)}: not an executable file${isAbsolute(file) ? "" : " and not found on PATH"}`);
    }
    if (!this.owner.endLeftovers) return;
    const left = await endMarked((m) => m.startsWith(`${this.owner.mark}:`), GROUP_KILL_GRACE_MS);
    if (left.length > 0) this.#log.warn({ pids: left }, "ended the trainer processes a previous daemon on this work dir left behind (they held the GPU)");
  }

  async train(job: TrainJob, run: TrainRun): Promise<PpoStats> {
    const [file, ...prefix] = this.#command;
    const args = [...prefix, ...seedFlags(job), ...(this.#custom ? this.config.extraArgs : rlloopFlags(job, this.config))];
    await rm(job.out, { recursive: true, force: true });
    // Its output goes to the log file's descriptor itself, both streams (interleaved as on a terminal): the result
    // then waits for the command's exit only, not for the end of a pipe that a worker it left behind may hold
    // (torchrun's workers run in sessions of their own; execa's `{file}` would pipe through this process). And it
    // runs in a process group of its own, ended as a whole at its time limit and when it exits (process-group.ts).
    const log = await open(run.logFile, "w");
    let timedOut = false;
    let result;
    const mark = `${this.owner.mark}:${randomUUID()}`;
    trackRun(mark);
    try {
      const fd = log.fd as 3; // execa takes any descriptor; its types name only 3-9
      const env = { ...this.config.env, [RUN_MARK]: mark };
      const child = execa(file as string, args, { cwd: job.image_base ?? undefined, env, stdin: "ignore", stdout: fd, stderr: fd, reject: false, detached: true });
      trackGroup(child.pid);
      const limit = this.config.timeoutS === null ? null : setTimeout(() => {
        timedOut = true;
        endGroup(child.pid);
      }, this.config.timeoutS * 1000);
      child.once("exit", () => endGroup(child.pid));
      result = await child.finally(() => clearTimeout(limit ?? undefined));
    } finally {
      await log.close();
      // and what left the group (workers in sessions of their own): the job is over, nothing of it may keep the GPU
      // when the next attempt, the probe or the next round starts
      await endRun(mark, GROUP_KILL_GRACE_MS, (pids) => this.#log.warn({ job: run.label, pids }, "ended processes the trainer command left behind"));
    }
    if (timedOut) throw new TrainerError(`trainer timed out on ${run.label} after trainer.timeoutS ${this.config.timeoutS} s\n${await logTail(run.logFile)}`);
    if (result.failed) throw new TrainerError(`trainer failed on ${run.label}: ${result.shortMessage}\n${await logTail(run.logFile)}`);
    return readTrainerOutput(job.out);
  }

  async close(): Promise<void> {}
}

/** The log's last 15 lines (of its last 16 KiB), for the error. */
async function logTail(path: string): Promise<string> {
  const handle = await open(path, "r");
  try {
    const { size } = await handle.stat();
    const length = Math.min(size, 16 * 1024);
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(length), 0, length, size - length);
    return buffer.subarray(0, bytesRead).toString("utf8").split("\n").slice(-15).join("\n");
  } finally {
    await handle.close();
  }
}

async function executable(file: string): Promise<boolean> {
  const candidates = file.includes("/") ? [file] : (process.env.PATH ?? "").split(delimiter).filter(Boolean).map((dir) => join(dir, file));
  for (const candidate of candidates) {
    try {
      await access(candidate, constants.X_OK);
      return true;
    } catch {
      // next
    }
  }
  return false;
}
