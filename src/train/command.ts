// `rlloop train sft|ppo`: the seed trainer's flags (bt_train.py) plus --model, --gpus and a few of rlloop's own —
// a thin front end over the contract's TrainJob (src/contract/job.ts): the flags become one job, validated by its
// schema. The action checks everything it can before touching the native module (imported lazily, so --help and
// input errors need no libtorch), runs one rank in this process or N rank processes (resident.ts), and prints input
// errors as one line with a non-zero exit.
import { Command, InvalidArgumentError, Option } from "commander";
import { Checkpointing, DeviceKind, DType, JOB_DEFAULTS, JobKind, TrainJob, type ModelSpec } from "../contract/index.js";
import { logger } from "../log.js";
import { TrainInputError, isTrainInputError } from "./errors.js";
import { checkJobFiles, checkRows, resolveModel } from "./job-inputs.js";

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
  for (const kind of Object.keys(JobKind) as JobKind[]) train.addCommand(trainSubcommand(kind));
}

function trainSubcommand(kind: JobKind): Command {
  return trainOptions(kind).action(async (raw: RawOptions) => {
    try {
      await trainAction(kind, raw);
    } catch (err) {
      if (!isTrainInputError(err)) throw err;
      process.stderr.write(`rlloop train ${kind}: ${err.message}\n`);
      process.exitCode = 2;
    }
  });
}

/** The flags of `rlloop train <kind>`. */
function trainOptions(kind: JobKind): Command {
  const d = JOB_DEFAULTS[kind];
  const jobOption = (cmd: Command, flags: string, description: string) => cmd.requiredOption(flags, description);
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
    .addOption(new Option("--device <kind>", "cuda or cpu (default: cuda when a GPU is visible)").choices(DeviceKind.options))
    .addOption(new Option("--dtype <t>", "compute dtype of the base model (default: bfloat16 on cuda, float32 on cpu)").choices(DType.options))
    .addOption(new Option("--checkpointing <mode>", "activation checkpointing per decoder layer (default: auto)").choices(Checkpointing.options).default("auto"))
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
  const job = jobFromFlags(kind, raw);
  await checkJobFiles(job);
  return { job, ...(await resolveModel(raw)) };
}

/** One run's part of the flags as the contract's job, with the seed's defaults. */
export function jobFromFlags(kind: JobKind, raw: RawOptions): TrainJob {
  const d = JOB_DEFAULTS[kind];
  const parsed = TrainJob.safeParse({
    kind,
    data: raw.data,
    image_base: null,
    valid: raw.valid ?? null,
    adapter: raw.adapter ?? null,
    ref: raw.ref ?? null,
    out: raw.out,
    epochs: raw.epochs ?? d.epochs,
    lr: raw.lr ?? d.lr,
    batch: raw.batch,
    accumulation: kind === "ppo" ? raw.accumulation : 1,
    max_updates: raw.maxUpdates ?? null,
    seed: raw.seed,
    prompt: raw.prompt ?? null,
    tis_cap: raw.tisCap ?? null,
    mismatch_stats: raw.mismatchStats ?? false,
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new TrainInputError(`${issue?.path.join(".") ?? "job"}: ${issue?.message ?? "invalid"}`);
  }
  return parsed.data;
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
