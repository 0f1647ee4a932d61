// Checks and resolution of a job's inputs before any model is loaded, shared by `rlloop train` and the daemon's
// trainer: the model folder and how it runs (device, dtype, ranks), the files a job names, and its rows and frames.
import { access, readdir } from "node:fs/promises";
import { existsSync } from "node:fs";
import type { Attention, Checkpointing, DType, ModelSpec, Tf32, TrainJob } from "../contract/index.js";
import { TrainInputError } from "./errors.js";
import { checkImages } from "./image-check.js";
import { readRows } from "./rows.js";

/** How the caller wants the model run; unset fields are decided from the GPUs the ranks will see. */
export interface ModelChoice {
  model: string;
  device?: "cuda" | "cpu" | null;
  dtype?: DType | null;
  checkpointing: Checkpointing;
  tf32?: Tf32;
  attention?: Attention;
  gpus?: number | null;
}

const ADAPTER_FILES = ["adapter_config.json", "adapter_model.safetensors"];

/**
 * The model folder is checked here. `env` is the rank processes' environment (the daemon's trainer.env over its own):
 * its CUDA_VISIBLE_DEVICES is the one that decides which GPUs they see.
 */
export async function resolveModel(choice: ModelChoice, env: NodeJS.ProcessEnv = process.env, flag = "--model"): Promise<{ model: ModelSpec; ranks: number }> {
  await mustHave(choice.model, flag, ["config.json", "tokenizer.json", "preprocessor_config.json"], true);
  const gpus = visibleGpus(env);
  const device = choice.device ?? (gpus > 0 ? "cuda" : "cpu");
  const ranks = choice.gpus ?? (device === "cpu" ? 1 : Math.max(1, gpus));
  const model: ModelSpec = {
    dir: choice.model,
    device: device === "cpu" ? "cpu" : "cuda:0",
    dtype: choice.dtype ?? (device === "cpu" ? "float32" : "bfloat16"),
    checkpointing: choice.checkpointing,
    tf32: choice.tf32 ?? "auto",
    attention: choice.attention ?? "flash",
  };
  return { model, ranks };
}

/** The files a job names exist (and adapter folders hold an adapter); `names` maps fields to the flag names shown. */
export async function checkJobFiles(job: TrainJob, names: Partial<Record<"data" | "valid" | "prompt" | "adapter" | "ref", string>> = {}): Promise<void> {
  const name = (field: keyof typeof names) => names[field] ?? `--${field}`;
  await mustExist(job.data, name("data"), "file");
  if (job.valid !== null) await mustExist(job.valid, name("valid"), "file");
  if (job.prompt !== null) await mustExist(job.prompt, name("prompt"), "file");
  if (job.adapter !== null) await mustHave(job.adapter, name("adapter"), ADAPTER_FILES);
  if (job.ref !== null) await mustHave(job.ref, name("ref"), ADAPTER_FILES);
}

/** An adapter folder holds a PEFT adapter; the error names `what`. */
export async function checkAdapterDir(dir: string, what: string): Promise<void> {
  await mustHave(dir, what, ADAPTER_FILES);
}

/** Rows and their frames are validated before any model is loaded (the recipes read them again). */
export async function checkRows(job: TrainJob): Promise<void> {
  const rows = await readRows(job.data, job.kind, "--data", job.image_base);
  await checkImages(rows, job.data);
  if (job.valid !== null) await checkImages(await readRows(job.valid, "sft", "--valid", job.image_base), job.valid);
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

async function mustHave(dir: string, flag: string, files: string[], weights = false): Promise<void> {
  await mustExist(dir, flag, "folder");
  let present: string[];
  try {
    present = await readdir(dir);
  } catch {
    throw new TrainInputError(`${flag} ${dir}: not a folder`);
  }
  const missing = files.filter((f) => !present.includes(f));
  if (missing.length > 0) throw new TrainInputError(`${flag} ${dir}: missing ${missing.join(", ")}`);
  if (weights && !present.some((f) => f === "model.safetensors" || f === "model.safetensors.index.json")) {
    throw new TrainInputError(`${flag} ${dir}: missing model.safetensors (or model.safetensors.index.json)`);
  }
}
