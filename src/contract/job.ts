// A trainer job: what one training run is asked to do, fully resolved (every default applied). The daemon builds
// one per round (src/loop/round-job.ts), `rlloop train sft|ppo` builds one from the seed's flags, and the rank
// processes take it as it is over IPC. Fields are the seed's flags (bt_train.py) in snake_case.
import { z } from "zod";

export const JobKind = { sft: "supervised fine-tuning of a new (or given) LoRA", ppo: "one PPO round continuing an adapter" } as const;
export type JobKind = keyof typeof JobKind;

/** The seed's per-mode defaults (bt_train.py main). */
export const JOB_DEFAULTS = {
  sft: { epochs: 1, lr: 1e-4 },
  ppo: { epochs: 2, lr: 3e-6 },
  batch: 16,
  accumulation: 2,
  seed: 0,
} as const;

const positiveInt = () => z.number().int({ error: "must be an integer" }).positive({ error: "must be a positive integer" });
const positive = () => z.number({ error: "must be a finite number" }).positive({ error: "must be a positive number" });
const path = (what: string) => z.string().min(1).meta({ description: what });

/** What a caller chooses (a CLI flag, the daemon's trainer.device); a rank then runs on cpu or cuda:<rank>. */
export const DeviceKind = z.enum(["cuda", "cpu"]).meta({ description: "cuda or cpu" });
export type DeviceKind = z.infer<typeof DeviceKind>;

export type Device = "cpu" | `cuda:${number}`;
export const Device = z.custom<Device>((v) => typeof v === "string" && /^(cpu|cuda:\d+)$/.test(v), { error: "must be cpu or cuda:<index>" })
  .meta({ description: "cpu or cuda:<index>", type: "string", pattern: "^(cpu|cuda:\\d+)$" });
export const DType = z.enum(["bfloat16", "float32"]).meta({ description: "compute dtype of the base model (LoRA masters are float32)" });
export type DType = z.infer<typeof DType>;
export const Checkpointing = z.enum(["on", "off", "auto"]).meta({ description: "activation checkpointing per decoder layer" });
export type Checkpointing = z.infer<typeof Checkpointing>;
export const Tf32 = z.enum(["auto", "on", "off"]).meta({ description: "TF32 for float32 matrix products on CUDA; auto: on for bfloat16, off for float32" });
export type Tf32 = z.infer<typeof Tf32>;
export const Attention = z.enum(["flash", "cudnn"]).meta({ description: "attention backend on CUDA: PyTorch's flash / memory-efficient kernels, or cuDNN" });
export type Attention = z.infer<typeof Attention>;

/** How a rank loads the base model; fixed for the life of a (resident) rank process. */
export const ModelSpec = z.strictObject({
  dir: path("Hugging Face Qwen3.5 checkpoint folder"),
  device: Device,
  dtype: DType,
  checkpointing: Checkpointing,
  tf32: Tf32,
  attention: Attention,
});
export type ModelSpec = z.infer<typeof ModelSpec>;

export const TrainJob = z.strictObject({
  kind: z.enum(["sft", "ppo"]),
  data: path("training rows, jsonl"),
  image_base: z.string().nullable().meta({ description: "folder relative image paths of the rows resolve against; null = the working directory" }),
  valid: z.string().nullable().meta({ description: "sft: validation rows (accuracy before training and after each epoch)" }),
  adapter: z.string().nullable().meta({ description: "ppo: the adapter to continue; sft: optional starting adapter (else a fresh LoRA)" }),
  ref: z.string().nullable().meta({ description: "ppo: the frozen reference adapter of the KL term" }),
  out: path("output folder"),
  epochs: positiveInt(),
  lr: positive(),
  batch: positiveInt().meta({ description: "rows per rank per forward" }),
  accumulation: positiveInt().meta({ description: "ppo: forwards per optimizer update" }),
  max_updates: positiveInt().nullable().meta({ description: "sft: stop after this many updates" }),
  seed: z.number().int().min(0).meta({ description: "row order (and a fresh adapter's initialisation)" }),
  prompt: z.string().nullable().meta({ description: "Jinja prompt template file; null = the default prompt" }),
  tis_cap: positive().nullable().meta({ description: "ppo: truncated importance sampling cap; null = off (the seed's behaviour)" }),
  mismatch_stats: z.boolean().meta({ description: "ppo: add sampler/trainer mismatch statistics to stats.json" }),
}).meta({ description: "one training run, every default applied" });
export type TrainJob = z.infer<typeof TrainJob>;
