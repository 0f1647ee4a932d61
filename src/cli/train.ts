// `rlloop train sft|ppo`: the seed trainer's flags (bt_train.py) plus --model, --gpus and a few of rlloop's own, a
// thin front end over the contract's TrainJob (src/train/one-shot.ts builds and runs it). Input errors are one line,
// "rlloop train <kind>: ...", and exit 2 before any model loads.
import { Command, Option } from "commander";
import { Attention, Checkpointing, DeviceKind, DType, JOB_DEFAULTS, JobKind, Tf32 } from "../contract/index.js";
import type { RawOptions } from "../train/one-shot.js";
import { EXIT } from "./exit-codes.js";
import { examples, nonNegativeInt, positiveInt, positiveNumber } from "./options.js";

export function trainCommand(): Command {
  const train = new Command("train").description("train the policy's LoRA adapter once (the seed trainer's sft and ppo modes)");
  for (const kind of Object.keys(JobKind) as JobKind[]) train.addCommand(trainSubcommand(kind));
  return train;
}

function trainSubcommand(kind: JobKind): Command {
  return trainOptions(kind).action(async (raw: RawOptions) => {
    const { runOneShot } = await import("../train/one-shot.js");
    const { isTrainInputError } = await import("../train/errors.js");
    try {
      await runOneShot(kind, raw);
    } catch (err) {
      if (!isTrainInputError(err)) throw err;
      process.stderr.write(`rlloop train ${kind}: ${err.message}\n`);
      process.exitCode = EXIT.usage;
    }
  });
}

/** The flags of `rlloop train <kind>`; a default commander shows is not repeated in the text. */
function trainOptions(kind: JobKind): Command {
  const d = JOB_DEFAULTS[kind];
  const cmd = new Command(kind).description(
    kind === "sft"
      ? "supervised fine-tuning: cross-entropy on the code digits and <|im_end|>, new LoRA r 16 alpha 32"
      : "one PPO round: continue --adapter and its optimizer state, k3 KL to --ref, sequence-level clipped ratio",
  );
  cmd
    .requiredOption("--data <file>", "training rows, jsonl (image, name, code[, memory]" + (kind === "ppo" ? ", adv, vllm_logp)" : ")"))
    .requiredOption("--out <dir>", "output folder: adapter" + (kind === "ppo" ? ", optimizer.safetensors, stats.json" : ", valid.json"))
    .requiredOption("--model <dir>", "Hugging Face Qwen3.5 checkpoint folder (config, safetensors, tokenizer, preprocessor)")
    .option("--epochs <n>", `passes over --data (default: ${d.epochs})`, positiveInt("--epochs"))
    .option("--lr <x>", `learning rate (default: ${d.lr.toExponential()}${kind === "sft" ? ", warm-up 10 updates then cosine" : ", constant"})`, positiveNumber("--lr"))
    .option("--batch <n>", "rows per rank per forward", positiveInt("--batch"), JOB_DEFAULTS.batch)
    .option("--seed <n>", `row order${kind === "sft" ? " and the new adapter's initialisation" : ""}`, nonNegativeInt("--seed"), JOB_DEFAULTS.seed)
    .option("--gpus <n>", "rank processes, one per GPU (default: all visible GPUs; 1 on CPU)", positiveInt("--gpus"))
    .addOption(new Option("--device <kind>", "cuda or cpu (default: cuda when a GPU is visible)").choices(DeviceKind.options))
    .addOption(new Option("--dtype <t>", "compute dtype of the base model (default: bfloat16 on cuda, float32 on cpu)").choices(DType.options))
    .addOption(new Option("--checkpointing <mode>", "activation checkpointing per decoder layer").choices(Checkpointing.options).default("auto"))
    .addOption(new Option("--tf32 <mode>", "TF32 for float32 matrix products on CUDA; auto: on for bfloat16, off for float32").choices(Tf32.options).default("auto"))
    .addOption(new Option("--attention <backend>", "attention backend on CUDA: PyTorch's flash kernels, or cuDNN").choices(Attention.options).default("flash"))
    .option("--prompt <file>", "Jinja template of the user prompt over name and memory (default: docs/trainer.md)");
  if (kind === "sft") {
    cmd
      .option("--valid <file>", "validation rows: digit and code accuracy before training and after each epoch")
      .option("--adapter <dir>", "start from this adapter instead of a new one (default: a new LoRA)")
      .option("--max-updates <n>", "stop after this many updates (default: epochs x batches)", positiveInt("--max-updates"));
    examples(cmd, "rlloop train sft --model /models/Qwen3.5-9B --data sft.jsonl --valid valid.jsonl --out sft-adapter");
  } else {
    cmd
      .requiredOption("--adapter <dir>", "adapter to continue (its optimizer.safetensors or seed optimizer.pt is loaded)")
      .requiredOption("--ref <dir>", "frozen reference adapter of the KL term (the SFT adapter)")
      .option("--accumulation <n>", "forwards per optimizer update", positiveInt("--accumulation"), JOB_DEFAULTS.accumulation)
      .option("--tis-cap <x>", "truncated importance sampling: weight each row by min(exp(old - vllm_logp), x) (default: off)", positiveNumber("--tis-cap"))
      .addOption(new Option("--mismatch-stats", "add sampler/trainer mismatch statistics (k1, k3, ESS) to stats.json").default(false));
    examples(cmd, "rlloop train ppo --model /models/Qwen3.5-9B --data round/train.jsonl --adapter r12/adapter --ref sft-adapter --out r13");
  }
  return cmd;
}
