// `rlloop train sft|ppo`: the seed trainer's flags (bt_train.py) plus --model, --gpus and a few of rlloop's own.
// The action validates everything it can before touching the native module (imported lazily, so --help and input
// errors need no libtorch), runs one rank in this process or N rank processes (resident.ts), and prints input
// errors as one line with a non-zero exit.
import { access, readdir } from "node:fs/promises";
import { existsSync } from "node:fs";
import { Command, CommanderError, InvalidArgumentError, Option } from "commander";
import { logger } from "../log.js";
import type { Checkpointing, DType } from "../native.js";
import { TrainInputError, isTrainInputError } from "./errors.js";
import { checkImages } from "./image-check.js";
import { readRows } from "./rows.js";
import { JOB_DEFAULTS, type JobKind, type ModelSpec, type TrainJob } from "./job.js";

export interface RawOptions {
  data: string;
  valid?: string;
  adapter?: string;
  ref?: string;
  out: string;
  epochs?: number;
  lr?: number;
  batch: number;
  accumulation: number;
  maxUpdates?: number;
  seed: number;
  model: string;
  gpus?: number;
  device?: "cpu" | "cuda";
  dtype?: DType;
  checkpointing: Checkpointing;
  prompt?: string;
  tisCap?: number;
  mismatchStats: boolean;
}

export function registerTrainCommand(program: Command): void {
  const train = program
    .command("train")
    .description("train the policy's LoRA adapter once (the seed trainer's sft and ppo modes)");
  for (const kind of ["sft", "ppo"] as const) train.addCommand(trainSubcommand(kind));
}

function trainSubcommand(kind: JobKind): Command {
  return trainOptions(kind, true).action(async (raw: RawOptions) => {
    try {
      await trainAction(kind, raw);
    } catch (err) {
      if (!isTrainInputError(err)) throw err;
      process.stderr.write(`rlloop train ${kind}: ${err.message}\n`);
      process.exitCode = 2;
    }
  });
}

/**
 * The flags of `rlloop train <kind>`. Without `jobFlags` the flags that name one run's files (--data, --out, and
 * ppo's --adapter, --ref) are optional, so that the model part of a flag list can be read before any run.
 */
function trainOptions(kind: JobKind, jobFlags: boolean): Command {
  const d = JOB_DEFAULTS[kind];
  const jobOption = (cmd: Command, flags: string, description: string) =>
    jobFlags ? cmd.requiredOption(flags, description) : cmd.option(flags, description);
  const cmd = new Command(kind).description(
    kind === "sft"
      ? "supervised fine-tuning: cross-entropy on the code digits and <|im_end|>, new LoRA r 16 alpha 32"
      : "one PPO round: continue --adapter and its optimizer state, k3 KL to --ref, sequence-level clipped ratio",
  );
  jobOption(cmd, "--data <file>", "training rows, jsonl (image, name, code[, memory]" + (kind === "ppo" ? ", adv, vllm_logp)" : ")"));
  jobOption(cmd, "--out <dir>", "output folder: adapter" + (kind === "ppo" ? ", optimizer.safetensors, stats.json" : ", valid.json"));
  cmd
    .requiredOption("--model <dir>", "Hugging Face Qwen3.5 checkpoint folder (config, safetensors, tokenizer, preprocessor)")
    .option("--epochs <n>", `passes over --data (default: ${d.epochs})`, positiveInt("--epochs"))
    .option("--lr <x>", `learning rate (default: ${d.lr.toExponential()}${kind === "sft" ? ", warm-up 10 updates then cosine" : ", constant"})`, positiveFloat("--lr"))
    .option("--batch <n>", `rows per rank per forward (default: ${JOB_DEFAULTS.batch})`, positiveInt("--batch"), JOB_DEFAULTS.batch)
    .option("--seed <n>", `row order${kind === "sft" ? " and the new adapter's initialisation" : ""} (default: ${JOB_DEFAULTS.seed})`, nonNegativeInt("--seed"), JOB_DEFAULTS.seed)
    .option("--gpus <n>", "rank processes, one per GPU (default: all visible GPUs; 1 on CPU)", positiveInt("--gpus"))
    .addOption(new Option("--device <kind>", "cuda or cpu (default: cuda when a GPU is visible)").choices(["cuda", "cpu"]))
    .addOption(new Option("--dtype <t>", "compute dtype of the base model (default: bfloat16 on cuda, float32 on cpu)").choices(["bfloat16", "float32"]))
    .addOption(new Option("--checkpointing <mode>", "activation checkpointing per decoder layer (default: auto)").choices(["on", "off", "auto"]).default("auto"))
    .option("--prompt <file>", "Jinja template of the user prompt over name and memory (default: docs/trainer.md)");
  if (kind === "sft") {
    cmd
      .option("--valid <file>", "validation rows: digit and code accuracy before training and after each epoch")
      .option("--adapter <dir>", "start from this adapter instead of a new one (default: a new LoRA)")
      .option("--max-updates <n>", "stop after this many updates (default: epochs x batches)", positiveInt("--max-updates"));
  } else {
    jobOption(cmd, "--adapter <dir>", "adapter to continue (its optimizer.safetensors or seed optimizer.pt is loaded)");
    jobOption(cmd, "--ref <dir>", "frozen reference adapter of the KL term (the SFT adapter)");
    cmd
      .option("--accumulation <n>", `forwards per optimizer update (default: ${JOB_DEFAULTS.accumulation})`, positiveInt("--accumulation"), JOB_DEFAULTS.accumulation)
      .option("--tis-cap <x>", "truncated importance sampling: weight each row by min(exp(old - vllm_logp), x) (default: off)", positiveFloat("--tis-cap"))
      .option("--mismatch-stats", "add sampler/trainer mismatch statistics (k1, k3, ESS) to stats.json (default: off)", false);
  }
  return cmd;
}

/**
 * `rlloop train <kind>` flags (no `train <kind>` in front) → the options commander gives the action, for callers that
 * run training without the CLI (the daemon's resident trainer). A bad or missing flag is a TrainInputError with
 * commander's message. Without `jobFlags`, see trainOptions.
 */
export function parseTrainFlags(kind: JobKind, flags: string[], jobFlags = true): RawOptions {
  const cmd = trainOptions(kind, jobFlags)
    .exitOverride()
    .configureOutput({ writeOut: () => undefined, writeErr: () => undefined });
  try {
    cmd.parse(flags, { from: "user" });
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    throw new TrainInputError(err.message.replace(/^error: /, ""), { cause: err });
  }
  return cmd.opts<RawOptions>();
}

async function trainAction(kind: JobKind, raw: RawOptions): Promise<void> {
  const { job, model, ranks } = await resolveOptions(kind, raw);
  await checkRows(job);
  const log = logger("train");
  if (ranks === 1) {
    const { loadModel, runJob } = await import("./run-job.js");
    const result = await runJob({ rank: 0, world: 1, group: null, log }, await loadModel(model), model, job);
    log.info({ result }, `${kind} done`);
    return;
  }
  const { ResidentTrainer } = await import("./resident.js");
  const trainer = await ResidentTrainer.start({ model, ranks, log });
  try {
    log.info({ result: await trainer.run(job) }, `${kind} done`);
  } finally {
    await trainer.stop();
  }
}

/** Flags → a TrainJob with the seed's defaults, the model spec and the rank count; input files checked here. */
export async function resolveOptions(kind: JobKind, raw: RawOptions): Promise<{ job: TrainJob; model: ModelSpec; ranks: number }> {
  const job = await resolveJob(kind, raw, null);
  return { job, ...(await resolveModel(raw)) };
}

/**
 * The model part of the flags (--model, --device, --dtype, --checkpointing, --gpus); the folder is checked here.
 * `env` is the rank processes' environment (the daemon's trainer.env over its own): its CUDA_VISIBLE_DEVICES is the
 * one that decides which GPUs they see.
 */
export async function resolveModel(
  raw: Pick<RawOptions, "model" | "device" | "dtype" | "checkpointing" | "gpus">,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ model: ModelSpec; ranks: number }> {
  await mustHave(raw.model, "--model", ["config.json", "tokenizer.json", "preprocessor_config.json"]);
  const gpus = visibleGpus(env);
  const device = raw.device ?? (gpus > 0 ? "cuda" : "cpu");
  const ranks = raw.gpus ?? (device === "cpu" ? 1 : Math.max(1, gpus));
  const model: ModelSpec = {
    dir: raw.model,
    device: device === "cpu" ? "cpu" : "cuda:0",
    dtype: raw.dtype ?? (device === "cpu" ? "float32" : "bfloat16"),
    checkpointing: raw.checkpointing,
  };
  return { model, ranks };
}

/** One run's part of the flags, with the seed's defaults; its input files are checked here. */
export async function resolveJob(kind: JobKind, raw: RawOptions, imageBase: string | null): Promise<TrainJob> {
  await mustExist(raw.data, "--data", "file");
  if (raw.valid !== undefined) await mustExist(raw.valid, "--valid", "file");
  if (raw.prompt !== undefined) await mustExist(raw.prompt, "--prompt", "file");
  if (raw.adapter !== undefined) await mustHave(raw.adapter, "--adapter", ["adapter_config.json", "adapter_model.safetensors"]);
  if (raw.ref !== undefined) await mustHave(raw.ref, "--ref", ["adapter_config.json", "adapter_model.safetensors"]);
  const d = JOB_DEFAULTS[kind];
  return {
    kind,
    data: raw.data,
    imageBase,
    valid: raw.valid ?? null,
    adapter: raw.adapter ?? null,
    ref: raw.ref ?? null,
    out: raw.out,
    epochs: raw.epochs ?? d.epochs,
    lr: raw.lr ?? d.lr,
    batch: raw.batch,
    accumulation: kind === "ppo" ? raw.accumulation : 1,
    maxUpdates: raw.maxUpdates ?? null,
    seed: raw.seed,
    prompt: raw.prompt ?? null,
    tisCap: raw.tisCap ?? null,
    mismatchStats: raw.mismatchStats ?? false,
  };
}

/** Rows and their frames are validated before any model is loaded (the recipes read them again). */
export async function checkRows(job: TrainJob): Promise<void> {
  const rows = await readRows(job.data, job.kind, "--data", job.imageBase);
  await checkImages(rows, job.data);
  if (job.valid !== null) await checkImages(await readRows(job.valid, "sft", "--valid", job.imageBase), job.valid);
}

/** GPUs this process may use: CUDA_VISIBLE_DEVICES when set, else the /dev/nvidiaN device files. */
export function visibleGpus(env: NodeJS.ProcessEnv = process.env): number {
  const visible = env.CUDA_VISIBLE_DEVICES;
  if (visible !== undefined) return visible.split(",").filter((s) => s.trim() !== "" && s.trim() !== "-1").length;
  let count = 0;
  while (existsSync(`/dev/nvidia${count}`)) count++;
  return count;
}

async function mustExist(path: string, flag: string, what: "file" | "folder"): Promise<void> {
  try {
    await access(path);
  } catch {
    throw new TrainInputError(`${flag} ${path}: no such ${what}`);
  }
}

async function mustHave(dir: string, flag: string, files: string[]): Promise<void> {
  await mustExist(dir, flag, "folder");
  let present: string[];
  try {
    present = await readdir(dir);
  } catch {
    throw new TrainInputError(`${flag} ${dir}: not a folder`);
  }
  const missing = files.filter((f) => !present.includes(f));
  const weights = flag !== "--model" || present.some((f) => f === "model.safetensors" || f === "model.safetensors.index.json");
  if (missing.length > 0) throw new TrainInputError(`${flag} ${dir}: missing ${missing.join(", ")}`);
  if (!weights) throw new TrainInputError(`${flag} ${dir}: missing model.safetensors (or model.safetensors.index.json)`);
}

function positiveInt(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError(`${flag} must be a positive integer, got '${value}'`);
    return n;
  };
}

function nonNegativeInt(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`${flag} must be a non-negative integer, got '${value}'`);
    return n;
  };
}

function positiveFloat(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`${flag} must be a positive number, got '${value}'`);
    return n;
  };
}
