// A process's first-use costs, paid while the real weights load. On CUDA a process's first steps are slower than
// its later ones by ~1 s at the 9B shapes (bench/RESULTS.md): each kernel's module is loaded at its first launch,
// cuBLAS and the attention kernels set themselves up, autograd starts its device threads, the optimizer's kernels
// load. None of that depends on the weights' values, so a stand-in model (one decoder layer of each kind, one vision
// block, the real shapes: Model.load's `standIn`) runs one job's first batches on another worker thread while
// Model.load reads the checkpoint, and is closed before the job starts. The seed pays the same costs in its round.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { ModelSpec, TrainJob } from "../contract/index.js";
import type { Logger } from "pino";
import { Model, type LoraSpec } from "../native.js";
import { CachedFrames } from "./cached-frames.js";
import { loadCollator } from "./collate.js";
import { LORA_ALPHA, LORA_RANK, LORA_TARGETS, MAX_GRAD_NORM, PPO_BETA, PPO_CLIP } from "./hyperparameters.js";
import { preparedBatches } from "./loader.js";
import type { ModelAssets } from "./model-assets.js";
import { shown, TrainInputError } from "./errors.js";
import { createOptimizer } from "./optimizer-state.js";
import { frozenGroups } from "./ppo.js";
import { secondsSince } from "./progress.js";
import { loadPrompt } from "./prompt.js";
import { readRows, type PpoRow } from "./rows.js";

const ADAPTER = "warm-up";

/**
 * Whether a job on this model is warmed up: on CUDA (the CPU loads nothing lazily) unless RLLOOP_WARM_UP is "off", a
 * diagnostic switch to measure what it saves; any value but "on" and "off" is refused, so a typo never passes.
 */
export function warmsUp(spec: ModelSpec, env: NodeJS.ProcessEnv = process.env): boolean {
  const choice = env.RLLOOP_WARM_UP ?? "on";
  if (choice !== "on" && choice !== "off") throw new TrainInputError(`RLLOOP_WARM_UP must be "on" or "off", got ${shown(choice)}`);
  return choice === "on" && spec.device.startsWith("cuda");
}

/**
 * Runs `job`'s first batches on a stand-in of `spec`'s model: the frozen pass's first two batches (`batch` rows,
 * then 2·batch), then one training step and one optimizer step on the first. Never fails: a warm-up that breaks is
 * logged and the job runs as it would have without it (it pays its first-use costs itself).
 */
export async function warmUp(spec: ModelSpec, assets: ModelAssets, job: TrainJob, log: Logger): Promise<void> {
  const start = performance.now();
  let standIn: Model | null = null;
  try {
    standIn = await Model.load(spec.dir, { ...modelOptions(spec), standIn: true });
    await firstSteps(standIn, assets, job);
    log.info({ seconds: secondsSince(start) }, "warm-up done");
  } catch (error) {
    log.warn({ err: error, seconds: secondsSince(start) }, "warm-up failed; the job pays its first-use costs itself");
  } finally {
    await standIn?.close().catch(() => undefined);
  }
}

function modelOptions(spec: ModelSpec) {
  const { device, dtype, checkpointing, tf32, attention } = spec;
  return { device, dtype, checkpointing, tf32, attention };
}

async function firstSteps(model: Model, assets: ModelAssets, job: TrainJob): Promise<void> {
  const rows = (await readRows(job.data, job.kind, "--data", job.image_base)).slice(0, 3 * job.batch);
  const collator = await loadCollator(assets, await loadPrompt(job.prompt ?? undefined), new CachedFrames(model));
  model.addAdapter(ADAPTER, await loraSpec(job));
  const groups = frozenGroups(rows.map((_, i) => i), job.batch);
  let first = null;
  for await (const b of preparedBatches(model, collator, rows, groups, job.data)) {
    await model.logprobs(b.batch, { adapter: ADAPTER });
    first ??= b;
  }
  model.setTrainable(ADAPTER);
  const optimizer = createOptimizer(model, ADAPTER, job.lr, null);
  const B = first!.rows.length;
  await model.backward(
    first!.batch,
    job.kind === "sft"
      ? { kind: "sft", scale: 1 }
      : // on-policy, as a round's first steps are (first-update.ts)
        { kind: "ppo", n: (first!.rows[0] as PpoRow).code.length, adv: new Float32Array(B).fill(1), clip: PPO_CLIP, beta: PPO_BETA, scale: 1 },
  );
  await optimizer.step({ lr: job.lr, maxGradNorm: MAX_GRAD_NORM });
}

/** The job's adapter's rank and alpha (its products' shapes), else a new adapter's; the seed's modules either way. */
async function loraSpec(job: TrainJob): Promise<LoraSpec> {
  const spec = { r: LORA_RANK, alpha: LORA_ALPHA, targetModules: LORA_TARGETS, seed: job.seed };
  if (job.adapter === null) return spec;
  try {
    const config = JSON.parse(await readFile(join(job.adapter, "adapter_config.json"), "utf8")) as { r?: unknown; lora_alpha?: unknown };
    if (Number.isInteger(config.r) && (config.r as number) > 0) spec.r = config.r as number;
    if (typeof config.lora_alpha === "number" && Number.isFinite(config.lora_alpha)) spec.alpha = config.lora_alpha;
  } catch {
    // the job itself reports an unreadable adapter
  }
  return spec;
}
