import { copyFile, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ModelAssets } from "../src/train/model-assets.js";
import { tinyTokenizerDir } from "./helpers/train-fixtures.js";
import { batches, batchesPerEpoch, rankOrder, seededPermutation, SplitMix64, strided } from "../src/train/batching.js";
import { FirstUpdateRun, planFirstUpdate } from "../src/train/first-update.js";
import { JOB_DEFAULTS, type TrainJob } from "../src/contract/index.js";
import { compilePrompt, DEFAULT_PROMPT_TEMPLATE } from "../src/train/prompt.js";
import { sftLearningRate } from "../src/train/schedule.js";
import { accuracyOf, countCorrect, mismatchStats } from "../src/train/stats.js";

describe("train schedule", () => {
  it("warms up over 10 updates then follows the cosine (hand-computed values, 1e-15 relative)", () => {
    const lr = 1e-4;
    const total = 100;
    const table: [number, number][] = [
      [0, lr * 0.1 * 1],
      [4, lr * 0.5 * 0.5 * (1 + Math.cos((Math.PI * 4) / 100))],
      [9, lr * 1 * 0.5 * (1 + Math.cos((Math.PI * 9) / 100))],
      [50, lr * 0.5],
      [99, lr * 0.5 * (1 + Math.cos((Math.PI * 99) / 100))],
    ];
    for (const [u, want] of table) expect(sftLearningRate(lr, u, total)).toBeCloseTo(want, 18);
  });
});

describe("train batching", () => {
  it("splitmix64 gives the published first outputs for seed 1234567", () => {
    // Reference values of the splitmix64 reference implementation (Vigna's splitmix64.c) seeded with 1234567.
    const rng = new SplitMix64(1234567n);
    expect([rng.next(), rng.next(), rng.next()]).toEqual([
      6457827717110365317n,
      3203168211198807973n,
      9817491932198370423n,
    ]);
  });

  it("permutes every index once, differently per epoch and seed, the same for the same inputs", () => {
    const p = seededPermutation(50, 3, 0);
    expect([...p].sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(seededPermutation(50, 3, 0)).toEqual(p);
    expect(seededPermutation(50, 3, 1)).not.toEqual(p);
    expect(seededPermutation(50, 4, 0)).not.toEqual(p);
  });

  it("shards like DistributedSampler: padding by repetition, rank r takes every world-th row", () => {
    const order = seededPermutation(7, 0, 0);
    const r0 = rankOrder({ rows: 7, seed: 0, epoch: 0, rank: 0, world: 2, shuffle: true });
    const r1 = rankOrder({ rows: 7, seed: 0, epoch: 0, rank: 1, world: 2, shuffle: true });
    expect(r0).toEqual([order[0], order[2], order[4], order[6]]);
    expect(r1).toEqual([order[1], order[3], order[5], order[0]]);
    expect(rankOrder({ rows: 5, seed: 0, epoch: 0, rank: 0, world: 1, shuffle: false })).toEqual([0, 1, 2, 3, 4]);
  });

  it("one rank with batch 2b reads the union of two ranks' batches of b, step by step", () => {
    const one = batches(rankOrder({ rows: 12, seed: 5, epoch: 1, rank: 0, world: 1, shuffle: true }), 4);
    const a = batches(rankOrder({ rows: 12, seed: 5, epoch: 1, rank: 0, world: 2, shuffle: true }), 2);
    const b = batches(rankOrder({ rows: 12, seed: 5, epoch: 1, rank: 1, world: 2, shuffle: true }), 2);
    one.forEach((batch, step) => expect([...a[step]!, ...b[step]!].sort()).toEqual([...batch].sort()));
  });

  it("counts batches per epoch and strides validation rows", () => {
    expect(batchesPerEpoch(33, 2, 16)).toBe(2);
    expect(batchesPerEpoch(32, 1, 16)).toBe(2);
    expect(batches([1, 2, 3, 4, 5], 2)).toEqual([[1, 2], [3, 4], [5]]);
    expect(strided([0, 1, 2, 3, 4], 1, 2)).toEqual([1, 3]);
  });
});

describe("train ppo first update (on-policy rows)", () => {
  const job = (over: Partial<TrainJob>): TrainJob => ({
    kind: "ppo", data: "", image_base: null, valid: null, adapter: null, ref: null, out: "", epochs: 2, lr: 3e-6,
    batch: JOB_DEFAULTS.batch, accumulation: 2, max_updates: null, seed: 0, prompt: null, tis_cap: null, mismatch_stats: false,
    ...over,
  });

  it("holds the rows of every rank's first `accumulation` batches of epoch 1, each owned by the lowest rank that trains it", () => {
    // 7 rows on 2 ranks: DistributedSampler pads to 8, so one row is trained by both ranks in epoch 1.
    const plan = planFirstUpdate(7, job({ batch: 2, accumulation: 2 }), 2)!;
    expect(plan.steps).toBe(2);
    const firstRows = (rank: number) => batches(rankOrder({ rows: 7, seed: 0, epoch: 0, rank, world: 2, shuffle: true }), 2).slice(0, 2).flat();
    const [r0, r1] = [firstRows(0), firstRows(1)];
    expect([...plan.owner.keys()].sort()).toEqual([...new Set([...r0, ...r1])].sort());
    for (const row of r0) expect(plan.owner.get(row)).toBe(0);
    for (const row of r1.filter((r) => !r0.includes(r))) expect(plan.owner.get(row)).toBe(1);
  });

  it("covers a whole short epoch, and is off with truncated importance sampling", () => {
    expect(planFirstUpdate(3, job({ batch: 2, accumulation: 4 }), 1)!.steps).toBe(2); // 2 batches, one update
    expect(planFirstUpdate(3, job({ tis_cap: 2 }), 1)).toBeNull();
  });

  it("fills the old (and a policy reference's) log-probs of the reported rows, the first n of each row's K", async () => {
    const plan = { steps: 1, owner: new Map([[1, 0], [2, 0]]) };
    const fixed = { old: new Float32Array(6).fill(-9), ref: new Float32Array(6).fill(-7), n: 2 };
    const run = new FirstUpdateRun(plan, 0, fixed, true);
    expect([run.covers(0, 0), run.covers(0, 1), run.covers(1, 0)]).toEqual([true, false, false]);
    run.record([2, 1], Float32Array.of(-1, -2, -3, -4, -5, -6)); // K = 3
    await run.complete({ rank: 0, world: 1, group: null, log: undefined as never });
    expect(Array.from(fixed.old)).toEqual([-9, -9, -4, -5, -1, -2]);
    expect(Array.from(fixed.ref)).toEqual([-7, -7, -4, -5, -1, -2]);
  });
});

describe("train prompt", () => {
  it("renders the default template with and without memory", () => {
    const render = compilePrompt(DEFAULT_PROMPT_TEMPLATE);
    expect(render({ name: "red cup" })).toBe("Target: red cup\nWrite the behaviour code.");
    expect(render({ name: "red cup", memory: ["0110", "1"] })).toBe("Target: red cup\nMemory: 0110 1\nWrite the behaviour code.");
  });

  it("renders a user template and rejects a broken one", () => {
    expect(compilePrompt("Find {{ name | upper }}.")({ name: "door" })).toBe("Find DOOR.");
    expect(() => compilePrompt("{% if %}", "--prompt p.jinja")).toThrow(/--prompt p.jinja: not a valid Jinja template/);
  });
});

describe("train stats", () => {
  it("counts digit and whole-code accuracy without the <|im_end|> column", () => {
    // 3 rows, n = 2, K = 3: [1,1,0] [1,0,1] [0,0,0]
    const counts = countCorrect({ digits: 0, codes: 0, rows: 0 }, Uint8Array.of(1, 1, 0, 1, 0, 1, 0, 0, 0), 3);
    expect(counts).toEqual({ digits: 3, codes: 1, rows: 3 });
    expect(accuracyOf(counts, 2)).toEqual({ digit_acc: 0.5, code_acc: 0.3333, rows: 3 });
  });

  it("computes mismatch k1, k3, ESS and the clipped fraction (hand-computed, 1e-4)", () => {
    const old = Float64Array.of(-1, -2);
    const vllm = Float64Array.of(-1.5, -1.5); // d = 0.5, -0.5
    const m = mismatchStats(old, vllm, 1.5);
    const w = [Math.exp(0.5), Math.exp(-0.5)];
    expect(m.k1).toBeCloseTo(0, 4);
    expect(m.k3).toBeCloseTo((w[0]! - 0.5 - 1 + w[1]! + 0.5 - 1) / 2, 4);
    expect(m.ess).toBeCloseTo((w[0]! + w[1]!) ** 2 / (2 * (w[0]! ** 2 + w[1]! ** 2)), 4);
    expect(m.tis_clipped).toBe(0.5);
  });
});

describe("train model assets", () => {
  it("reads the tokenizer once for every job; a failed read is not kept, so the next job reads again", async () => {
    const source = await tinyTokenizerDir();
    const dir = await mkdtemp(join(tmpdir(), "rlloop-assets-"));
    try {
      for (const f of await readdir(source)) if (f !== "tokenizer.json") await copyFile(join(source, f), join(dir, f));
      const assets = new ModelAssets(dir);
      await expect(assets.collator()).rejects.toThrow(/no tokenizer\.json/);
      await copyFile(join(source, "tokenizer.json"), join(dir, "tokenizer.json"));
      const first = await assets.collator();
      expect(first.tokenizer.idOf("<|im_end|>")).toBeGreaterThan(0);
      expect(await assets.collator()).toBe(first);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
