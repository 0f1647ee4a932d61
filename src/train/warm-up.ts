// A process's first-use costs, paid while the real weights load. On CUDA a process's first steps are slower than
// its later ones by ~1 s at the 9B shapes (bench/RESULTS.md): each kernel's module is loaded at its first launch,
// cuBLAS and the attention kernels set themselves up, autograd starts its device threads, the optimizer's kernels
// load. None of that depends on the weights' values, so a stand-in model (one decoder layer of each kind, one vision
// block, the real shapes: Model.load's `standIn`) is loaded beside the real model and runs the job's first batch on
// its own worker thread while Model.load reads the checkpoint, and is closed before the job starts. The seed pays
// the same costs in its round.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { ModelSpec, TrainJob } from "../contract/index.js";
import type { Logger } from "pino";
import { Model, type LoraSpec, type RowInput } from "../native.js";
import { rankOrder } from "./batching.js";
import { CachedFrames } from "./cached-frames.js";
import { loadJobCollator } from "./collate.js";
import { LORA_ALPHA, LORA_RANK, LORA_TARGETS, MAX_GRAD_NORM, PPO_BETA, PPO_CLIP } from "./hyperparameters.js";
import type { ModelAssets } from "./model-assets.js";
import { shown, TrainInputError } from "./errors.js";
import { createOptimizer } from "./optimizer-state.js";
import { PhaseClock, round2 } from "../phase-clock.js";
import { readRows, type PpoRow, type SftRow } from "./rows.js";

const ADAPTER = "warm-up";

/** The diagnostics that trace a process's steps (native/src/diagnostics/switches.h): a warm-up would hide the steps
 *  they are set to see, and the stand-in's tasks would enter their traces. */
const TRACING = ["RLLOOP_PROFILE_WINDOWS", "RLLOOP_PROFILE_TRACE", "RLLOOP_BACKWARD_TIMELINE"];

/**
 * Whether a job on this model is warmed up: on CUDA (the CPU loads nothing lazily) unless RLLOOP_WARM_UP is "off", a
 * diagnostic switch to measure what it saves, or a tracing diagnostic is set; any value but "on" and "off" is
 * refused, so a typo never passes.
 */
export function warmsUp(spec: ModelSpec, env: NodeJS.ProcessEnv = process.env): boolean {
  const choice = env.RLLOOP_WARM_UP ?? "on";
  if (choice !== "on" && choice !== "off") throw new TrainInputError(`RLLOOP_WARM_UP must be "on" or "off", got ${shown(choice)}`);
  return choice === "on" && spec.device.startsWith("cuda") && !TRACING.some((name) => env[name]);
}

/** The stand-in of `spec`'s model (Model.load's `standIn`), issued beside the real load: it needs config.json alone. */
export function loadStandIn(spec: ModelSpec): Promise<Model> {
  const { dir, ...options } = spec;
  const loading = Model.load(dir, { ...options, standIn: true });
  loading.catch(() => undefined); // read by warmUp, which reports a failed load
  return loading;
}

/**
 * Runs `job`'s first training batch (collated while the stand-in loads) on the stand-in: log-probs without grad (the
 * frozen pass's kernels), then one training step and one optimizer step, as the job's first steps do; then closes the
 * stand-in. The frozen pass's larger batches, the objective's variants with a separate reference or truncated IS,
 * the adapter's own target modules and the save are not run: their kernels are the same or few. Never fails: a
 * warm-up that breaks is logged and the job runs as it would have without it (it pays its first-use costs itself).
 */
export async function warmUp(standIn: Promise<Model>, assets: ModelAssets, job: TrainJob, log: Logger): Promise<void> {
  const clock = new PhaseClock();
  let model: Model | null = null;
  try {
    const collated = firstBatch(assets, job); // while the stand-in loads
    collated.catch(() => undefined); // read below, after the stand-in
    model = await standIn;
    clock.lap("standIn");
    await firstSteps(model, await collated, job, clock);
    log.info({ seconds: round2(clock.totalSeconds()), phasesS: clock.laps() }, "warm-up done");
  } catch (error) {
    log.warn({ err: error, phasesS: clock.laps() }, "warm-up failed; the job pays its first-use costs itself");
  } finally {
    await model?.close().catch(() => undefined);
  }
}

/** The job's first training batch (its first epoch's first `batch` rows), collated: frames decoded and preprocessed. */
async function firstBatch(assets: ModelAssets, job: TrainJob): Promise<{ rows: SftRow[]; inputs: RowInput[] }> {
  const all = await readRows(job.data, job.kind, "--data", job.image_base);
  const order = rankOrder({ rows: all.length, seed: job.seed, epoch: 0, rank: 0, world: 1, shuffle: true });
  const rows = order.slice(0, job.batch).map((i) => all[i]!);
  if (rows.length === 0) throw new Error("the job has no rows");
  // (the stand-in's vision cache is empty: every frame goes with its pixels)
  const collator = await loadJobCollator(assets, job, new CachedFrames({ visionCached: () => false }));
  return { rows, inputs: await Promise.all(rows.map((row) => collator.row(row, job.data))) };
}

async function firstSteps(model: Model, first: { rows: SftRow[]; inputs: RowInput[] }, job: TrainJob, clock: PhaseClock): Promise<void> {
  model.addAdapter(ADAPTER, await loraSpec(job));
  const batch = await model.prepare(first.inputs);
  clock.lap("batch");
  await model.logprobs(batch, { adapter: ADAPTER });
  clock.lap("logprobs");
  model.setTrainable(ADAPTER);
  const optimizer = createOptimizer(model, ADAPTER, job.lr, null);
  const B = first.rows.length;
  await model.backward(
    batch,
    job.kind === "sft"
      ? { kind: "sft", scale: 1 }
      : // on-policy, as a round's first steps are (first-update.ts)
        { kind: "ppo", n: (first.rows[0] as PpoRow).code.length, adv: new Float32Array(B).fill(1), clip: PPO_CLIP, beta: PPO_BETA, scale: 1 },
  );
  clock.lap("backward");
  await optimizer.step({ lr: job.lr, maxGradNorm: MAX_GRAD_NORM });
  clock.lap("step");
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
