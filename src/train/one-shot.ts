// A one-shot `rlloop train sft|ppo` run (the flags: src/cli/train.ts): the seed trainer's flags become the contract's
// TrainJob (src/contract/job.ts), validated by its schema; everything is checked before the native module is touched
// (imported lazily), then one rank runs in this process or N rank processes start (resident.ts).
import { JOB_DEFAULTS, TrainJob, type Attention, type Checkpointing, type DType, type JobKind, type ModelSpec, type Tf32 } from "../contract/index.js";
import { logger } from "../log.js";
import { TrainInputError } from "./errors.js";
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
  tf32: Tf32;
  attention: Attention;
  prompt?: string;
  tisCap?: number;
  mismatchStats: boolean;
}

/** One `rlloop train <kind>` run: one rank in this process, or N rank processes (resident.ts). */
export async function runOneShot(kind: JobKind, raw: RawOptions): Promise<void> {
  const { job, model, ranks } = await resolveOptions(kind, raw);
  await checkRows(job);
  const log = logger("train");
  if (ranks === 1) {
    const { loadModelWithAssets, runJob } = await import("./run-job.js");
    const loaded = await loadModelWithAssets(model, { job, log });
    const result = await runJob({ rank: 0, world: 1, group: null, log }, loaded.model, loaded.assets, job, loaded.early);
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
