// What one training run is asked to do: the seed's flags, resolved to values (defaults applied), so that the CLI,
// the rank processes and the resident trainer pass one typed object around.
import type { Checkpointing, Device, DType } from "../native.js";

/** The seed's LoRA targets (bt_train.py MODULES), matched with re.fullmatch against module paths. */
export const LORA_TARGETS =
  "model.language_model.*\\.(q_proj|k_proj|v_proj|o_proj|in_proj_qkv|in_proj_z|in_proj_b|in_proj_a|out_proj" +
  "|gate_proj|up_proj|down_proj)$";
export const LORA_RANK = 16;
export const LORA_ALPHA = 32;
export const PPO_CLIP = 0.2;
export const PPO_BETA = 0.02;
export const MAX_GRAD_NORM = 1.0;
export const WEIGHT_DECAY = 0.01;

export type JobKind = "sft" | "ppo";

export interface TrainJob {
  kind: JobKind;
  data: string; // jsonl rows
  imageBase: string | null; // folder that relative image paths of the rows resolve against; null = the working directory
  valid: string | null; // sft: validation rows (accuracy before training and after each epoch)
  adapter: string | null; // ppo: the adapter to continue; sft: optional starting adapter (else a fresh LoRA)
  ref: string | null; // ppo: the frozen reference adapter of the KL term
  out: string;
  epochs: number;
  lr: number;
  batch: number; // rows per rank per forward
  accumulation: number; // ppo: forwards per optimizer update
  maxUpdates: number | null; // sft: stop after this many updates
  seed: number; // row order (and a fresh adapter's initialisation)
  prompt: string | null; // Jinja prompt template file; null = the default prompt
  tisCap: number | null; // ppo: truncated importance sampling cap; null = off (the seed's behaviour)
  mismatchStats: boolean; // ppo: add sampler/trainer mismatch statistics to stats.json
}

/** The seed's per-mode defaults (bt_train.py main). */
export const JOB_DEFAULTS = {
  sft: { epochs: 1, lr: 1e-4 },
  ppo: { epochs: 2, lr: 3e-6 },
  batch: 16,
  accumulation: 2,
  seed: 0,
} as const;

/** How a rank loads the base model; fixed for the life of a (resident) rank process. */
export interface ModelSpec {
  dir: string;
  device: Device;
  dtype: DType;
  checkpointing: Checkpointing;
}
