// PPO round, the seed's variant (seed/README.md, bt_train.py ppo):
//   - continues --adapter (and the optimizer state beside it) with a constant --lr; --ref is a frozen second
//     adapter; old (policy) and ref log-probs of the code tokens are computed once, no grad, batches of 2·batch (the first of batch);
//   - sequence-level ratio: ratio = exp(Σ_code lp − Σ_code old), one per row, not per token;
//   - pg = −min(ratio·A, clip(ratio, 1 − 0.2, 1 + 0.2)·A) with the row's advantage A (no value function, no
//     entropy bonus: advantages come with the rows);
//   - k3 KL to the reference, summed over the code tokens: kl = Σ exp(ref − lp) − (ref − lp) − 1, β = 0.02;
//   - loss = mean over the batch of (pg + β·kl) / accumulation; an AdamW step every `accumulation` forwards and
//     after an epoch's last forward, gradient-norm clip 1.0; <|im_end|> is not scored (only the n code tokens).
// The first update's rows get their old log-probs from their own training forwards, not a frozen pass
// (first-update.ts: the policy has not changed yet).
// Off by default (docs/trainer.md): truncated importance sampling against the sampler, each row's loss weighted
// by min(exp(Σ old − vllm_logp), cap) (--tis-cap), and sampler/trainer mismatch statistics (--mismatch-stats).
// Outputs in --out: the adapter, optimizer.safetensors, stats.json (stats.ts PpoStats).
import { join } from "node:path";
import { deviceMemoryStats, type Model, type Optimizer, type RowInput } from "../native.js";
import { epochGroups } from "./batching.js";
import { EARLY_BATCHES, takeEarlyBatch, type EarlyBatches } from "./early-batch.js";
import { frozenPassPlan } from "./frozen-pass.js";
import { loadJobCollator, type Collator } from "./collate.js";
import type { ModelAssets } from "./model-assets.js";
import { encodeStats, encodeWithNonFinite, LOGP_GAPS_FILE, type LogpGaps } from "../contract/index.js";
import { writeFileAtomic } from "./files.js";
import type { TrainJob } from "../contract/index.js";
import { MAX_GRAD_NORM, PPO_BETA, PPO_CLIP } from "./hyperparameters.js";
import { sameAdapter } from "./adapter-identity.js";
import { CachedFrames } from "./cached-frames.js";
import { FirstUpdateRun, planFirstUpdate, type FirstUpdatePlan, type RoundLogprobs } from "./first-update.js";
import { preparedBatches, startAfter, type DataWait, type PreparedBatches } from "./loader.js";
import { createOptimizer, OPTIMIZER_FILE, restoreOptimizer } from "./optimizer-state.js";
import { PhaseClock } from "../phase-clock.js";
import { Progress, round2, secondsSince } from "./progress.js";
import { meanOverRanks, sumOverRanks, type RankContext } from "./rank-context.js";
import { readRows, type PpoRow } from "./rows.js";
import { mean, mismatchStats, round4, type PpoStats, type PpoStepStats } from "./stats.js";

export const POLICY = "policy";
export const REFERENCE = "ref";

export interface PpoResult {
  kind: "ppo";
  stats: PpoStats;
  updates: number;
  optimizerFrom: "rlloop" | "seed" | "none";
  out: string;
}

/** `early`: the frozen pass's first batches, collated beside the model's load (early-batch.ts); each used where its
 *  rows are that batch's, else collated again here. */
export async function runPpo(
  ctx: RankContext,
  model: Model,
  assets: ModelAssets,
  job: TrainJob,
  early?: EarlyBatches,
): Promise<PpoResult> {
  const setup = new PhaseClock();
  const rows = await readRows(job.data, "ppo", "--data", job.image_base);
  const frames = new CachedFrames(model);
  const collator = await loadJobCollator(assets, job, frames);
  setup.lap("rows");
  // A loop's first round references the policy itself (byte-identical): then the reference is not loaded at all.
  const refIsPolicy = await sameAdapter(job.adapter!, job.ref!);
  const firstUpdate = planFirstUpdate(rows.length, job, ctx.world);
  // The frozen pass's first batch is prepared (on prepare()'s thread) while the adapters load (on the worker); each
  // early batch is awaited alone, when its group is loaded.
  const takeEarly = early && ((g: number, group: number[]) =>
    g < EARLY_BATCHES ? takeEarlyBatch(early.then((all) => all?.[g] ?? null), group, rows, collator, frames) : null);
  const frozen = frozenPassBatches(ctx, model, collator, rows, job, firstUpdate, refIsPolicy, takeEarly);
  // Epoch 1 opens with the first update's rows, which the frozen pass skips: their frames are decoded and uploaded
  // while it runs, not after it with the GPU idle — from when its first batch is ready, not beside that batch's
  // preparation, which the GPU waits for (the frozen pass started 0.34-0.55 s late waiting for it this way,
  // 0.47-0.73 s with the epoch's batch prepared beside it: two H200 calls, bench/RESULTS.md).
  // Without a first update, epoch 1 starts as a later epoch does: once the pass before it hands out its last batch.
  const epochData = (epoch: number) => epochBatches(ctx, model, collator, rows, job, epoch);
  const firstEpoch = startAfter(firstUpdate ? frozen.batches.firstReady : frozen.batches.lastTaken, () => epochData(0));
  await model.loadAdapter(POLICY, job.adapter!);
  if (!refIsPolicy) await model.loadAdapter(REFERENCE, job.ref!);
  setup.lap("adapters");
  const fixed = await fixedLogprobs(ctx, model, frozen, rows, refIsPolicy);
  setup.lap("frozenPass");
  model.setTrainable(POLICY);
  const optimizer = createOptimizer(model, POLICY, job.lr, ctx.group);
  const optimizerFrom = await restoreOptimizer(optimizer, job.adapter!, assets.dir);
  setup.lap("optimizer");
  const vllm = Float64Array.from(rows, (r) => r.vllm_logp);
  // (truncated IS turns the first-update shortcut off: these weights need every row's old log-probs now)
  const weights = job.tis_cap === null ? null : truncatedWeights(rowSums(fixed.old, fixed.n), vllm, job.tis_cap);
  const first = firstUpdate && new FirstUpdateRun(firstUpdate, ctx.rank, fixed, refIsPolicy);
  ctx.log.info(
    {
      rows: rows.length,
      ranks: ctx.world,
      batch: job.batch,
      optimizerFrom,
      tisCap: job.tis_cap,
      onPolicyRows: firstUpdate?.owner.size ?? 0,
      phasesS: setup.laps(), // where the time before the first training step went
      // what the training steps start from on an accelerator (weights, adapters, vision cache): with the steps'
      // tokens and recomputed layers, what the activations' memory estimate (docs/native-api.md) is checked against
      gpuAllocatedGiB: round2(deviceMemoryStats(model.info.device).allocatedBytes / 2 ** 30),
    },
    "ppo start",
  );

  const start = performance.now();
  let updates = 0;
  let last: PpoStepStats[] = [];
  let data = await firstEpoch;
  for (let epoch = 0; epoch < job.epochs; epoch++) {
    // The next epoch's first batch is prepared while this epoch's last one trains, not after it with the GPU idle.
    const next = epoch + 1 < job.epochs ? startAfter(data.batches.lastTaken, () => epochData(epoch + 1)) : null;
    const epochRun = await ppoEpoch(ctx, model, optimizer, data, fixed, weights, job, epoch, first);
    updates += epochRun.updates;
    last = epochRun.steps;
    ctx.log.info(
      {
        epoch: epoch + 1,
        pg: mean(last.map((s) => s.pg)),
        kl: mean(last.map((s) => s.kl)),
        seconds: epochRun.seconds,
        dataWaitS: epochRun.dataWaitS,
        recomputedLayers: epochRun.recomputedLayers,
        maxTokens: epochRun.maxTokens,
      },
      `ppo epoch ${epoch + 1}`,
    );
    if (next) data = await next;
  }
  const totals = await meanOverRanks(
    ctx,
    Float32Array.of(mean(last.map((s) => s.pg)), mean(last.map((s) => s.kl)), mean(last.map((s) => s.clipFrac))),
  );
  const oldSums = rowSums(fixed.old, fixed.n); // complete now: the first update's rows were filled in after it
  const gaps = Array.from(oldSums, (o, i) => o - vllm[i]!);
  const stats = roundStats(totals, oldSums, vllm, gaps, (performance.now() - start) / 1000, job);
  const peak = deviceMemoryStats(model.info.device).peakAllocatedBytes; // since runJob's reset at the job start
  if (peak > 0) stats.gpu_memory_bytes = peak; // the daemon's stats events report it (gpuMemory)
  if (ctx.rank === 0) {
    const saving = performance.now();
    await saveRound(optimizer, job.out, stats, gaps, start);
    ctx.log.info({ seconds: secondsSince(saving), out: job.out }, "ppo saved");
  }
  return { kind: "ppo", stats, updates, optimizerFrom, out: job.out };
}

/** The frozen pass's batches (rows[rank::world]: `batch` rows, then 2·batch rows each), the first one already being
 *  prepared. */
interface FrozenPassBatches {
  batches: PreparedBatches<PpoRow>;
  count: number;
  wait: DataWait;
  /** The adapters a batch runs under: the policy only where some row is not trained in the first update. */
  adaptersFor(indices: number[]): string[];
  onPolicyRows: number;
}

function frozenPassBatches(
  ctx: RankContext,
  model: Model,
  collator: Collator,
  rows: PpoRow[],
  job: TrainJob,
  firstUpdate: FirstUpdatePlan | null,
  refIsPolicy: boolean,
  takeEarly: ((g: number, group: number[]) => Promise<RowInput[] | null> | null) | undefined,
): FrozenPassBatches {
  const wait: DataWait = { ms: 0 };
  const { groups, onPolicy, onPolicyRows } = frozenPassPlan(rows.length, ctx.rank, ctx.world, job.batch, firstUpdate, refIsPolicy);
  return {
    batches: preparedBatches(model, collator, rows, groups, job.data, wait, takeEarly),
    count: groups.length,
    wait,
    adaptersFor: (indices) =>
      refIsPolicy ? [POLICY] : indices.every(onPolicy) ? [REFERENCE] : [REFERENCE, POLICY],
    onPolicyRows,
  };
}

/**
 * Old (policy) and ref log-probs of the code tokens, once, with no grad; rows[rank::world] on each rank, less the
 * first update's rows under the policy (first-update.ts: zeros until that update fills them in). When the two
 * adapters are the same (`shared`: a loop's first round) one pass gives both: the values are identical by definition.
 */
async function fixedLogprobs(
  ctx: RankContext,
  model: Model,
  frozen: FrozenPassBatches,
  rows: PpoRow[],
  shared: boolean,
): Promise<RoundLogprobs> {
  const start = performance.now();
  const { wait } = frozen;
  const n = rows[0]!.code.length;
  const adapters = shared ? [POLICY] : [REFERENCE, POLICY];
  // zeros except this rank's rows, summed over ranks below; each batch is prepared once for both adapters
  const values = Object.fromEntries(adapters.map((a) => [a, new Float32Array(rows.length * n)]));
  const progress = new Progress(ctx.log, "ppo fixed log-probs", frozen.count, ctx.rank === 0);
  let step = 0;
  for await (const b of frozen.batches) {
    for (const adapter of frozen.adaptersFor(b.indices)) {
      const { logp, K } = await model.logprobs(b.batch, { adapter });
      b.indices.forEach((row, i) => values[adapter]!.set(logp.subarray(i * K, i * K + n), row * n));
    }
    progress.step({ step: ++step, rows: b.rows.length * ctx.world, dataWaitS: round2(wait.ms / 1000) });
  }
  const out: Record<string, Float32Array> = {};
  for (const adapter of adapters) out[adapter] = await sumOverRanks(ctx, values[adapter]!);
  ctx.log.info(
    {
      passes: shared ? 1 : 2,
      refIsPolicy: shared,
      onPolicyRows: frozen.onPolicyRows,
      seconds: secondsSince(start),
      dataWaitS: round2(wait.ms / 1000),
      firstBatchS: wait.first, // its rows' collation, then prepare()'s tensors and upload
      collatedEarly: wait.collatedEarly ?? 0, // batches collated beside the model's load (early-batch.ts)
    },
    "ppo fixed log-probs",
  );
  return { old: out[POLICY]!, ref: shared ? out[POLICY]!.slice() : out[REFERENCE]!, n };
}

/** One epoch's batches of `batch` rows in the rank's order, the first one already being prepared. */
interface EpochBatches {
  groups: number[][];
  batches: PreparedBatches<PpoRow>;
  wait: DataWait;
}

function epochBatches(ctx: RankContext, model: Model, collator: Collator, rows: PpoRow[], job: TrainJob, epoch: number): EpochBatches {
  const groups = epochGroups(rows.length, job, epoch, ctx.rank, ctx.world);
  const wait: DataWait = { ms: 0 };
  return { groups, wait, batches: preparedBatches(model, collator, rows, groups, job.data, wait) };
}

async function ppoEpoch(
  ctx: RankContext,
  model: Model,
  optimizer: Optimizer,
  data: EpochBatches,
  fixed: RoundLogprobs,
  weights: Float32Array | null,
  job: TrainJob,
  epoch: number,
  first: FirstUpdateRun | null,
): Promise<{ steps: PpoStepStats[]; updates: number; seconds: number; dataWaitS: number; recomputedLayers: number; maxTokens: number }> {
  const { groups, wait } = data;
  const progress = new Progress(ctx.log, `ppo epoch ${epoch + 1} forward`, groups.length, ctx.rank === 0);
  const steps: PpoStepStats[] = [];
  const start = performance.now();
  let updates = 0;
  let step = 0;
  let recomputedLayers = 0; // the most any step's backward repeated (checkpointing: memory traded for time)
  let maxTokens = 0; // the largest batch, padded (B·L)
  for await (const b of data.batches) {
    const { n } = fixed;
    const onPolicy = first?.covers(epoch, step) ?? false;
    const result = await model.backward(b.batch, {
      kind: "ppo",
      n,
      // on-policy: old (and a policy reference) are this forward's own log-probs (first-update.ts)
      ...(onPolicy ? {} : { old: Float32Array.from(b.indices, (i) => sum(fixed.old.subarray(i * n, (i + 1) * n))) }),
      ...(onPolicy && first!.refIsPolicy ? {} : { ref: gatherRows(fixed.ref, b.indices, n) }),
      adv: Float32Array.from(b.rows, (r) => r.adv),
      clip: PPO_CLIP,
      beta: PPO_BETA,
      scale: 1 / job.accumulation,
      ...(weights === null ? {} : { weight: Float32Array.from(b.indices, (i) => weights[i]!) }),
    });
    if (onPolicy) first!.record(b.indices, result.logp);
    recomputedLayers = Math.max(recomputedLayers, result.recomputedLayers);
    maxTokens = Math.max(maxTokens, b.batch.B * b.batch.L);
    step++;
    if (step % job.accumulation === 0 || step === groups.length) {
      await optimizer.step({ lr: job.lr, maxGradNorm: MAX_GRAD_NORM });
      updates++;
    }
    if (onPolicy && !first!.covers(epoch, step)) await first!.complete(ctx); // before any later step reads them
    steps.push(stepStats(result.pg!, result.kl!, result.ratio!));
    progress.step({ step, loss: result.loss, rows: b.rows.length * ctx.world });
  }
  return { steps, updates, seconds: secondsSince(start), dataWaitS: round2(wait.ms / 1000), recomputedLayers, maxTokens };
}

function stepStats(pg: Float32Array, kl: Float32Array, ratio: Float32Array): PpoStepStats {
  const clipped = Array.from(ratio, (r) => (Math.abs(r - 1) > PPO_CLIP ? 1 : 0));
  return { pg: mean(pg), kl: mean(kl), clipFrac: mean(clipped) };
}

/** Truncated IS weights min(exp(Σ old − vllm_logp), cap), one per row (sequence level). */
export function truncatedWeights(oldSums: Float64Array, vllm: Float64Array, cap: number): Float32Array {
  return Float32Array.from(oldSums, (o, i) => Math.min(Math.exp(o - vllm[i]!), cap));
}

/** `gaps`: each row's Σ old − vllm_logp. */
function roundStats(
  totals: Float32Array,
  oldSums: Float64Array,
  vllm: Float64Array,
  gaps: number[],
  seconds: number,
  job: TrainJob,
): PpoStats {
  const stats: PpoStats = {
    pg_loss: round4(totals[0]!),
    kl: round4(totals[1]!),
    clip_frac: round4(totals[2]!),
    logp_gap: round4(mean(gaps)),
    logp_gap_abs: round4(mean(gaps.map(Math.abs))),
    rows: gaps.length,
    train_s: Math.round(seconds),
  };
  if (job.mismatch_stats || job.tis_cap !== null) stats.mismatch = mismatchStats(oldSums, vllm, job.tis_cap);
  return stats;
}

/** Adapter and optimizer state, each row's log-prob gap, then stats.json (last: it marks the folder finished), whose
 *  train_s counts the saving too (as the seed's does). */
async function saveRound(optimizer: Optimizer, out: string, stats: PpoStats, gaps: number[], start: number): Promise<void> {
  await optimizer.saveWithAdapter(out, OPTIMIZER_FILE);
  await writeFileAtomic(join(out, LOGP_GAPS_FILE), encodeWithNonFinite({ gaps: gaps.map(round4) } satisfies LogpGaps));
  stats.train_s = Math.round(secondsSince(start));
  await writeFileAtomic(join(out, "stats.json"), encodeStats(stats));
}

function rowSums(values: Float32Array, n: number): Float64Array {
  return Float64Array.from({ length: values.length / n }, (_, i) => sum(values.subarray(i * n, (i + 1) * n)));
}

function gatherRows(values: Float32Array, indices: number[], n: number): Float32Array {
  const out = new Float32Array(indices.length * n);
  indices.forEach((row, i) => out.set(values.subarray(row * n, (row + 1) * n), i * n));
  return out;
}

function sum(values: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < values.length; i++) s += values[i]!;
  return s;
}
