// A job's passes hand over without the accelerator waiting between them: the next pass's first batch is asked for
// (collated, then prepare()d) while the pass before it runs its last batch, not after. On the CPU build and the tiny
// Qwen3.5 of the trainer fixture: the batch that ends a pass is held back until the next pass's first batch has been
// asked for — a job that started the next pass only after the last batch had run would never ask, and fail here.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { Model, type Batch } from "../src/native.js";
import type { ModelSpec, TrainJob } from "../src/contract/index.js";
import { batchesPerEpoch } from "../src/train/batching.js";
import { planFirstUpdate } from "../src/train/first-update.js";
import { frozenPassPlan } from "../src/train/frozen-pass.js";
import { jobFromFlags } from "../src/train/one-shot.js";
import { readRows } from "../src/train/rows.js";
import { loadModelWithAssets, runJob } from "../src/train/run-job.js";
import { captureLog, expectSamePpoFiles, trainFixture } from "./helpers/train-run.js";

type Line = Record<string, unknown>;

// How long a held batch waits for the next pass's first batch before the test says it never came (a deadlock
// otherwise): not a timing of the job, which asks for it within milliseconds.
const NEVER_ASKED_MS = 30_000;

describe("train epoch prefetch - each pass's first batch is prepared while the pass before it ends (PPO, SFT)", () => {
  let fx: string;
  let work: string;
  const spec = (): ModelSpec => ({ dir: join(fx, "model"), device: "cpu", dtype: "float32", checkpointing: "auto", tf32: "auto", attention: "flash" });
  const job = (out: string, tisCap?: number): TrainJob =>
    jobFromFlags("ppo", {
      data: join(fx, "ppo.jsonl"), adapter: join(fx, "seed-round"), ref: join(fx, "ref"), prompt: join(fx, "prompt.jinja"),
      out: join(work, out), batch: 2, accumulation: 2, lr: 3e-5, seed: 0, model: join(fx, "model"),
      checkpointing: "auto", tf32: "auto", attention: "flash", mismatchStats: false, ...(tisCap === undefined ? {} : { tisCap }),
    });
  const sftJob = (out: string, batch: number, valid?: string): TrainJob =>
    jobFromFlags("sft", {
      data: join(fx, "sft.jsonl"), adapter: join(fx, "adapter"), prompt: join(fx, "prompt.jinja"), out: join(work, out),
      batch, accumulation: 1, epochs: 2, lr: 1e-3, seed: 0, model: join(fx, "model"), checkpointing: "auto", tf32: "auto",
      attention: "flash", mismatchStats: false,
      ...(valid === undefined ? {} : { valid }),
    });

  const original = { prepare: Model.prototype.prepare, logprobs: Model.prototype.logprobs, backward: Model.prototype.backward };
  /** Batches prepared, by the order prepare() was called in, and how many calls there were. */
  let prepared: Promise<Batch>[] = [];
  /** For each prepare() call, how many of the calls before it had returned their batch. */
  let readyAtCall: number[] = [];
  let asked: Array<() => void> = [];
  /** Resolves once prepare() has been called `count` times, or rejects after NEVER_ASKED_MS. */
  const askedFor = (count: number, what: string): Promise<void> => {
    if (prepared.length >= count) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${what} was not asked for while the pass before it waited on its last batch`)), NEVER_ASKED_MS);
      asked.push(() => {
        if (prepared.length < count) return;
        clearTimeout(timer);
        resolve();
      });
    });
  };

  /**
   * Runs `j` with the batch prepared as the `hold`-th (1-based; 0: the first batch the call runs) held, in the call
   * named, until prepare() has been called `until` times (by default once more: the next pass's first batch).
   * Returns the job's log lines.
   */
  const runHolding = async (j: TrainJob, hold: number, call: "logprobs" | "backward", what: string, until = hold + 1): Promise<Line[]> => {
    prepared = [];
    readyAtCall = [];
    asked = [];
    let ready = 0;
    vi.spyOn(Model.prototype, "prepare").mockImplementation(function (this: Model, rows) {
      readyAtCall.push(ready);
      const batch = original.prepare.call(this, rows);
      void batch.then(() => ready++);
      prepared.push(batch);
      for (const check of asked) check();
      return batch;
    });
    let held = false;
    const holdLast = async (batch: Batch) => {
      if (held || prepared.length < hold || (hold > 0 && batch !== (await prepared[hold - 1]))) return;
      held = true;
      await askedFor(until, what);
    };
    vi.spyOn(Model.prototype, "logprobs").mockImplementation(async function (this: Model, batch, opts) {
      if (call === "logprobs") await holdLast(batch);
      return original.logprobs.call(this, batch, opts);
    });
    vi.spyOn(Model.prototype, "backward").mockImplementation(async function (this: Model, batch, objective) {
      if (call === "backward") await holdLast(batch);
      return original.backward.call(this, batch, objective);
    });
    const { model, assets } = await loadModelWithAssets(spec());
    const lines: Line[] = [];
    try {
      await runJob({ rank: 0, world: 1, group: null, log: captureLog(lines) }, model, assets, j, undefined);
    } finally {
      await model.close();
    }
    expect(held, `the ${hold}th batch was run`).toBe(true);
    return lines;
  };

  beforeAll(async () => {
    fx = await trainFixture();
    work = await mkdtemp(join(tmpdir(), "rlloop-epoch-prefetch-"));
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });
  afterAll(async () => {
    await rm(work, { recursive: true, force: true });
  });

  it("epoch 2's first batch is asked for while epoch 1's last batch is held; the files are a plain run's", async () => {
    const j = job("held");
    const rows = await readRows(j.data, "ppo", "--data", null);
    const frozen = frozenPassPlan(rows.length, 0, 1, j.batch, planFirstUpdate(rows.length, j, 1), false).groups.length;
    const perEpoch = batchesPerEpoch(rows.length, 1, j.batch);
    expect(perEpoch).toBeGreaterThan(j.accumulation); // epoch 1's last batch is not one of the first update's
    // the frozen pass's and epoch 1's batches are all asked for before epoch 2's first (each pass asks in order)
    const lines = await runHolding(j, frozen + perEpoch, "backward", "epoch 2's first batch");
    expect(lines.filter((l) => typeof l.msg === "string" && /^ppo epoch \d$/.test(l.msg))).toHaveLength(2);
    expect(prepared).toHaveLength(frozen + 2 * perEpoch);
    vi.restoreAllMocks();
    // the same job run plainly: the same files, bit for bit
    const { model, assets } = await loadModelWithAssets(spec());
    try {
      await runJob({ rank: 0, world: 1, group: null, log: captureLog([]) }, model, assets, job("plain"), undefined);
    } finally {
      await model.close();
    }
    await expectSamePpoFiles(join(work, "held"), join(work, "plain"));
  });

  it("epoch 2's first batch failing while epoch 1 trains fails the job with its own error once epoch 2 reads it", async () => {
    // (a frame that no longer decodes, an upload that fails): the failure waits for its epoch, as a batch prepared
    // one ahead within a pass does; epoch 1 still ends, and nothing is left unhandled (vitest fails a run that is)
    const j = job("failed-ahead");
    const rows = await readRows(j.data, "ppo", "--data", null);
    const frozen = frozenPassPlan(rows.length, 0, 1, j.batch, planFirstUpdate(rows.length, j, 1), false).groups.length;
    const perEpoch = batchesPerEpoch(rows.length, 1, j.batch);
    let calls = 0;
    vi.spyOn(Model.prototype, "prepare").mockImplementation(function (this: Model, inputs) {
      if (++calls === frozen + perEpoch + 1) return Promise.reject(new Error("epoch 2's first batch could not be prepared"));
      return original.prepare.call(this, inputs);
    });
    const { model, assets } = await loadModelWithAssets(spec());
    const lines: Line[] = [];
    try {
      await expect(runJob({ rank: 0, world: 1, group: null, log: captureLog(lines) }, model, assets, j, undefined))
        .rejects.toThrow("epoch 2's first batch could not be prepared");
    } finally {
      await model.close();
    }
    expect(lines.filter((l) => l.msg === "ppo epoch 1")).toHaveLength(1);
    expect(lines.filter((l) => l.msg === "ppo epoch 2")).toHaveLength(0);
    expect(calls).toBe(frozen + perEpoch + 1); // nothing asked for after it
  });

  it("without a first update (truncated IS), epoch 1's first batch is asked for while the frozen pass's last is held", async () => {
    const j = job("tis", 2);
    const rows = await readRows(j.data, "ppo", "--data", null);
    expect(planFirstUpdate(rows.length, j, 1)).toBeNull();
    const frozen = frozenPassPlan(rows.length, 0, 1, j.batch, null, false).groups.length;
    expect(frozen).toBeGreaterThan(1);
    await runHolding(j, frozen, "logprobs", "epoch 1's first batch");
    expect(prepared).toHaveLength(frozen + 2 * batchesPerEpoch(rows.length, 1, j.batch));
  });

  it("SFT: epoch 2's first batch is asked for while epoch 1's last batch is held", async () => {
    const j = sftJob("sft-held", 2);
    const rows = await readRows(j.data, "sft", "--data", null);
    const perEpoch = batchesPerEpoch(rows.length, 1, j.batch);
    await runHolding(j, perEpoch, "backward", "epoch 2's first batch");
    expect(prepared).toHaveLength(2 * perEpoch);
  });

  it("SFT: the first batch is asked for while the accuracy pass before training runs, once that pass's first is ready", async () => {
    // one validation batch (its rows fit a batch): held until a second batch is asked for, the training's first
    const valid = join(fx, "valid.jsonl");
    const validRows = (await readRows(valid, "sft", "--valid", null)).length;
    const j = sftJob("sft-valid", validRows, valid);
    const perEpoch = batchesPerEpoch((await readRows(j.data, "sft", "--data", null)).length, 1, j.batch);
    await runHolding(j, 0, "logprobs", "the first training batch", 2);
    expect(prepared).toHaveLength(2 * perEpoch + 3); // and the validation batch before training and after each epoch
    expect(readyAtCall[1]).toBe(1); // not beside the validation's batch, which the accelerator waits for
  });
});
