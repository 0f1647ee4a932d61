// SFT recipe, the seed's: mean cross-entropy over the scored tokens (code digits + <|im_end|>) of each batch, one
// AdamW update per batch (betas 0.9/0.999, eps 1e-8, weight decay 0.01), gradient-norm clip 1.0, LR warm-up over
// 10 updates then cosine (schedule.ts), a new LoRA (r 16, alpha 32, the seed's modules) unless --adapter gives a
// starting one. Accuracy on --valid before training and after each epoch; the adapter and valid.json are written
// to --out after each epoch. With several ranks, gradients are averaged over ranks at each update (DDP's rule).
import { join } from "node:path";
import type { Model } from "../native.js";
import { validationAccuracy } from "./accuracy.js";
import { batchesPerEpoch, epochGroups } from "./batching.js";
import { CachedFrames } from "./cached-frames.js";
import { loadJobCollator } from "./collate.js";
import type { ModelAssets } from "./model-assets.js";
import type { TrainJob } from "../contract/index.js";
import { LORA_ALPHA, LORA_RANK, LORA_TARGETS, MAX_GRAD_NORM } from "./hyperparameters.js";
import { preparedBatches, startAfter } from "./loader.js";
import { createOptimizer } from "./optimizer-state.js";
import { Progress } from "./progress.js";
import { meanOverRanks, type RankContext } from "./rank-context.js";
import { readRows } from "./rows.js";
import { sftLearningRate } from "./schedule.js";
import type { Accuracy } from "./stats.js";
import { writeJsonAtomic } from "./files.js";

export const POLICY = "policy";

export interface SftResult {
  kind: "sft";
  updates: number;
  valid: Accuracy | null;
  lastLoss: number;
  out: string;
}

export async function runSft(ctx: RankContext, model: Model, assets: ModelAssets, job: TrainJob): Promise<SftResult> {
  const rows = await readRows(job.data, "sft", "--data", job.image_base);
  const valid = job.valid === null ? null : await readRows(job.valid, "sft", "--valid", job.image_base);
  const collator = await loadJobCollator(assets, job, new CachedFrames(model));
  await setUpAdapter(model, job);
  const optimizer = createOptimizer(model, POLICY, job.lr, ctx.group);
  const perEpoch = batchesPerEpoch(rows.length, ctx.world, job.batch);
  const total = Math.min(job.max_updates ?? Infinity, perEpoch * job.epochs);
  ctx.log.info({ rows: rows.length, valid: valid?.length ?? 0, ranks: ctx.world, batch: job.batch, updates: total }, "sft start");
  const check = async (label: string, onFirstReady?: () => void) => {
    if (valid === null) {
      onFirstReady?.();
      return null;
    }
    const acc = await validationAccuracy(ctx, model, collator, valid, job.valid!, POLICY, job.batch, onFirstReady);
    ctx.log.info({ ...acc, at: label }, `valid ${label}`);
    return acc;
  };
  const epochBatches = (epoch: number) => preparedBatches(model, collator, rows, epochGroups(rows.length, job, epoch, ctx.rank, ctx.world), job.data);
  // Each epoch's first batch is prepared while what comes before it runs, not after it with the accelerator idle:
  // epoch 1's from when the accuracy pass before training has its own first batch ready (not beside that one, which
  // the accelerator waits for), a later epoch's while the epoch before it runs its last step (the accuracy pass and
  // the save after that epoch come on top).
  let validReady = () => {};
  const firstEpoch = startAfter(new Promise<void>((resolve) => (validReady = resolve)), () => epochBatches(0));
  await check("before", validReady);
  let data = await firstEpoch;
  const progress = new Progress(ctx.log, "sft update", total, ctx.rank === 0);
  let update = 0;
  let lastLoss = NaN;
  let acc: Accuracy | null = null;
  for (let epoch = 0; epoch < job.epochs && update < total; epoch++) {
    const next = (epoch + 1) * perEpoch < total ? startAfter(data.lastTaken, () => epochBatches(epoch + 1)) : null;
    for await (const b of data) {
      const { loss, recomputedLayers } = await model.backward(b.batch, { kind: "sft", scale: 1 });
      const lr = sftLearningRate(job.lr, update, total);
      const { gradNorm } = await optimizer.step({ lr, maxGradNorm: MAX_GRAD_NORM });
      lastLoss = (await meanOverRanks(ctx, Float32Array.of(loss)))[0]!;
      update++;
      progress.step({ step: update, loss: lastLoss, rows: b.rows.length * ctx.world, lr, gradNorm, recomputedLayers });
      if (update >= total) break;
    }
    acc = await check(`epoch ${epoch + 1}`);
    if (ctx.rank === 0) await saveEpoch(model, job.out, epoch + 1, update, acc);
    if (next) data = await next;
  }
  return { kind: "sft", updates: update, valid: acc, lastLoss, out: job.out };
}

async function setUpAdapter(model: Model, job: TrainJob): Promise<void> {
  if (job.adapter === null) {
    model.addAdapter(POLICY, { r: LORA_RANK, alpha: LORA_ALPHA, targetModules: LORA_TARGETS, seed: job.seed });
  } else {
    await model.loadAdapter(POLICY, job.adapter);
  }
  model.setTrainable(POLICY);
}

async function saveEpoch(model: Model, out: string, epoch: number, updates: number, acc: Accuracy | null) {
  await model.saveAdapter(POLICY, out);
  if (acc !== null) await writeJsonAtomic(join(out, "valid.json"), { epoch, updates, ...acc });
}
