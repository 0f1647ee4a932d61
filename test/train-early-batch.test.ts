// A one-shot PPO job's first frozen batches, collated while the model loads (src/train/early-batch.ts), on the CPU
// build and the tiny Qwen3.5 of the trainer fixture. What must hold: the batches hold the rows the job's frozen pass
// asks for first (with a reference of its own and with the policy as its reference), the job takes them instead of
// collating those rows again, its files are a plain run's bit for bit, and an early batch that failed or holds other
// rows costs the job nothing: it collates the batch itself.
import { copyFile, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { Model } from "../src/native.js";
import type { ModelSpec, TrainJob } from "../src/contract/index.js";
import { CachedFrames } from "../src/train/cached-frames.js";
import { loadCollator, type Collator } from "../src/train/collate.js";
import { collateFirstFrozenBatches, EARLY_BATCHES, takeEarlyBatch, type EarlyBatch, type EarlyBatches } from "../src/train/early-batch.js";
import { loadPrompt } from "../src/train/prompt.js";
import { planFirstUpdate } from "../src/train/first-update.js";
import { frozenPassPlan } from "../src/train/frozen-pass.js";
import { ModelAssets } from "../src/train/model-assets.js";
import { jobFromFlags } from "../src/train/one-shot.js";
import { readRows } from "../src/train/rows.js";
import { loadModelWithAssets, runJob } from "../src/train/run-job.js";
import { captureLog, expectSamePpoFiles, trainFixture } from "./helpers/train-run.js";

type Line = Record<string, unknown>;

/** The early batches of `job`, collated. */
const collated = async (assets: ModelAssets, job: TrainJob): Promise<EarlyBatch[]> => Promise.all((await collateFirstFrozenBatches(assets, job))!);

describe("train early batch - a one-shot PPO job's first frozen batches collated beside the load", () => {
  let fx: string;
  let work: string;
  const spec = (): ModelSpec => ({ dir: join(fx, "model"), device: "cpu", dtype: "float32", checkpointing: "auto", tf32: "auto", attention: "flash" });
  const job = (out: string, kind: "ppo" | "sft" = "ppo", ref = "ref", data = join(fx, `${kind}.jsonl`)): TrainJob =>
    jobFromFlags(kind, {
      data, adapter: join(fx, "seed-round"), ref: join(fx, ref), prompt: join(fx, "prompt.jinja"),
      out: join(work, out), batch: 2, accumulation: 2, lr: 3e-5, seed: 0, model: join(fx, "model"),
      checkpointing: "auto", tf32: "auto", attention: "flash", mismatchStats: false,
    });

  /** Runs `job(out)` on a freshly loaded model with `early`; returns the frozen pass's log line. */
  const runWith = async (out: string, early?: EarlyBatches): Promise<Line> => {
    const { model, assets } = await loadModelWithAssets(spec());
    const lines: Line[] = [];
    try {
      await runJob({ rank: 0, world: 1, group: null, log: captureLog(lines) }, model, assets, job(out), early);
    } finally {
      await model.close();
    }
    return lines.find((l) => l.msg === "ppo fixed log-probs")!;
  };
  let plainRun: Promise<Line> | null = null;
  const plain = () => (plainRun ??= runWith("plain"));
  /** `out`'s files equal the plain job's, bit for bit, stats.json but its seconds. */
  const expectSameOutputs = async (out: string) => {
    await plain();
    await expectSamePpoFiles(join(work, out), join(work, "plain"));
  };

  beforeAll(async () => {
    fx = await trainFixture();
    work = await mkdtemp(join(tmpdir(), "rlloop-early-batch-"));
  });
  afterAll(async () => {
    await rm(work, { recursive: true, force: true });
  });

  it("holds the frozen pass's first batches' rows, with a reference of its own and with the policy as its reference; none for SFT", async () => {
    const assets = new ModelAssets(join(fx, "model"));
    const rows = await readRows(join(fx, "ppo.jsonl"), "ppo", "--data", null);
    expect(rows.length).toBeGreaterThan(4); // more rows than the first update's and a batch: the orders differ
    for (const [ref, refIsPolicy] of [["ref", false], ["seed-round", true]] as const) {
      const j = job("never", "ppo", ref);
      const early = await collated(assets, j);
      const { groups } = frozenPassPlan(rows.length, 0, 1, j.batch, planFirstUpdate(rows.length, j, 1), refIsPolicy);
      expect(groups.length, ref).toBeGreaterThanOrEqual(EARLY_BATCHES);
      expect(early.map((b) => b.indices), ref).toEqual(groups.slice(0, EARLY_BATCHES));
      // every frame with its pixels and its cache key: the fresh model holds no features yet
      for (const input of early.flatMap((b) => b.inputs)) expect(input.images.map((i) => [i.pixelValues !== undefined, typeof i.cacheKey])).toEqual([[true, "string"]]);
    }
    expect(await collateFirstFrozenBatches(assets, job("never", "sft"))).toBeNull();
  });

  it("a job given it does not collate those rows again, and its files are a plain run's bit for bit", async () => {
    const plainLine = await plain();
    const loaded = await loadModelWithAssets(spec(), { job: job("early"), log: captureLog([]) });
    expect(loaded.early).toBeDefined();
    const lines: Line[] = [];
    try {
      await runJob({ rank: 0, world: 1, group: null, log: captureLog(lines) }, loaded.model, loaded.assets, job("early"), loaded.early);
    } finally {
      await loaded.model.close();
    }
    expect(lines.find((l) => l.msg === "ppo fixed log-probs")).toMatchObject({ firstBatchS: { collatedEarly: true }, collatedEarly: EARLY_BATCHES });
    expect(plainLine).toMatchObject({ firstBatchS: { collatedEarly: false }, collatedEarly: 0 });
    await expectSameOutputs("early");
    // the batches gave their inputs (their frames' pixels) up to the job: `early` holds none of them now
    expect((await Promise.all((await loaded.early)!)).map((b) => b.inputs.length)).toEqual(Array(EARLY_BATCHES).fill(0));
    // with the policy as its own reference the pass's order differs (first-update rows skipped): taken as well
    const policyJob = job("early-policy-ref", "ppo", "seed-round");
    const policyLoaded = await loadModelWithAssets(spec(), { job: policyJob, log: captureLog([]) });
    const policyLines: Line[] = [];
    try {
      await runJob({ rank: 0, world: 1, group: null, log: captureLog(policyLines) }, policyLoaded.model, policyLoaded.assets, policyJob, policyLoaded.early);
    } finally {
      await policyLoaded.model.close();
    }
    expect(policyLines.find((l) => l.msg === "ppo fixed log-probs")).toMatchObject({ firstBatchS: { collatedEarly: true }, collatedEarly: EARLY_BATCHES });
  });

  it("the job learns the early frames' grids: their rows' later batches send them without pixels, as in a plain run", async () => {
    // a frame of its own for every row, so that the early batch's frames come back only with its own rows, and the
    // policy as its reference, so that those rows are not the first update's: they come back in epoch 1 after the
    // frozen pass has cached their features
    const lines = (await readFile(join(fx, "ppo.jsonl"), "utf8")).trim().split("\n");
    const unique = await Promise.all(lines.map(async (line, i) => {
      const row = JSON.parse(line) as { image: string };
      const copy = join(work, `own-frame-${i}.png`);
      await copyFile(row.image, copy);
      return JSON.stringify({ ...row, image: copy });
    }));
    const data = join(work, "own-frames.jsonl");
    await writeFile(data, unique.join("\n") + "\n");
    const prepare = vi.spyOn(Model.prototype, "prepare");
    const withoutPixels = () => prepare.mock.calls.flatMap(([rows]) => rows.flatMap((r) => r.images)).filter((i) => i.pixelValues === undefined).length;
    const runOwn = async (out: string, early: boolean) => {
      const j = job(out, "ppo", "seed-round", data);
      const loaded = await loadModelWithAssets(spec(), early ? { job: j, log: captureLog([]) } : undefined);
      try {
        await runJob({ rank: 0, world: 1, group: null, log: captureLog([]) }, loaded.model, loaded.assets, j, loaded.early);
      } finally {
        await loaded.model.close();
      }
    };
    try {
      await runOwn("own-plain", false);
      const plainCached = withoutPixels();
      prepare.mockClear();
      await runOwn("own-early", true);
      expect(plainCached).toBeGreaterThan(0);
      expect(withoutPixels()).toBe(plainCached);
    } finally {
      prepare.mockRestore();
    }
  });

  it("taken only with the job's rows at the job's places, the same texts and the same frame files", async () => {
    const assets = new ModelAssets(join(fx, "model"));
    const j = job("never");
    const rows = await readRows(j.data, "ppo", "--data", null);
    const early = (await collated(assets, j))[0]!;
    const group = early.indices;
    const take = async (b: EarlyBatch, r = rows) => {
      const frames = new CachedFrames({ visionCached: () => false });
      const collator = await loadCollator(assets, await loadPrompt(j.prompt ?? undefined), frames);
      return takeEarlyBatch(Promise.resolve(b), group, r, collator, frames);
    };
    // each take is given a batch of its own: a batch gives its inputs up, taken or not
    const fresh = (): EarlyBatch => ({ ...early, inputs: [...early.inputs] });
    const given = fresh();
    const taken = await take(given);
    expect(taken?.length).toBe(group.length);
    expect(taken!.every((input, i) => input === early.inputs[i])).toBe(true);
    expect(given.inputs).toHaveLength(0); // its pixels live as long as the job's batch, not as long as `early`
    const reversed = { indices: [...early.indices].reverse(), texts: [...early.texts].reverse(), inputs: [...early.inputs].reverse() };
    expect(await take(reversed)).toBeNull(); // the same rows in another order
    expect(reversed.inputs).toHaveLength(0);
    const recoded = rows.map((r, i) => (i === group[0] ? { ...r, code: r.code === "1" ? "2" : "1" } : r));
    expect(await take(fresh(), recoded)).toBeNull(); // a row's text changed since
    const copy = join(work, "frame-copy.png");
    await copyFile(rows[group[0]!]!.image, copy);
    const moved = rows.map((r, i) => (i === group[0] ? { ...r, image: copy } : r));
    expect(await take(fresh(), moved)).toBeNull(); // another frame file
    // a row that no longer renders (its file changed since): a mismatch, not a failure of the job
    const unrenderable = { text: () => { throw new Error("the template fails on this row"); } } as unknown as Collator;
    expect(await takeEarlyBatch(Promise.resolve(fresh()), group, rows, unrenderable, new CachedFrames({ visionCached: () => false }))).toBeNull();
    expect(await takeEarlyBatch(Promise.reject(new Error("unreadable")), group, rows, (await loadCollator(assets, await loadPrompt(undefined))), new CachedFrames({ visionCached: () => false }))).toBeNull();
  });

  it("an early batch that failed, or that holds other rows, is collated again by the job, with the same files", async () => {
    const failed = Promise.reject(new Error("the rows could not be read"));
    failed.catch(() => undefined);
    expect(await runWith("early-failed", failed)).toMatchObject({ firstBatchS: { collatedEarly: false }, collatedEarly: 0 });
    await expectSameOutputs("early-failed");
    // one batch failed alone (a frame of its rows unreadable): the other is taken
    const assets = new ModelAssets(join(fx, "model"));
    const ours = await collated(assets, job("never"));
    const firstFailed = Promise.reject(new Error("a frame could not be read"));
    firstFailed.catch(() => undefined);
    const oneFailed = await runWith("early-one-failed", Promise.resolve([firstFailed, Promise.resolve(ours[1]!)]));
    expect(oneFailed).toMatchObject({ firstBatchS: { collatedEarly: false }, collatedEarly: 1 });
    await expectSameOutputs("early-one-failed");
    const other = await collated(assets, job("never", "ppo", "seed-round")); // the other reference's rows
    expect(other[0]!.indices).not.toEqual(ours[0]!.indices);
    expect(other[1]!.indices.length).not.toBe(ours[1]!.indices.length); // the second refused for its length alone
    expect(await runWith("early-other-rows", Promise.resolve(other.map((b) => Promise.resolve(b))))).toMatchObject({ firstBatchS: { collatedEarly: false }, collatedEarly: 0 });
    await expectSameOutputs("early-other-rows");
  });

  it("the job takes its first early batch without waiting for the second", async () => {
    // the second batch is held until the job prepares its first: a job that waited for the second before taking
    // the first would never prepare it, and hang here
    const [first, second] = await collated(new ModelAssets(join(fx, "model")), job("never"));
    let release!: () => void;
    const held = new Promise<EarlyBatch>((resolve) => (release = () => resolve(second!)));
    const prepare = Model.prototype.prepare;
    const spy = vi.spyOn(Model.prototype, "prepare").mockImplementation(function (this: Model, ...args) {
      release();
      return prepare.apply(this, args);
    });
    try {
      const line = await runWith("early-ordered", Promise.resolve([Promise.resolve(first!), held]));
      expect(line).toMatchObject({ firstBatchS: { collatedEarly: true }, collatedEarly: EARLY_BATCHES });
    } finally {
      spy.mockRestore();
    }
    await expectSameOutputs("early-ordered");
  });

  it("a batch whose frame does not decode fails alone: the next one is collated", async () => {
    const j0 = job("never");
    const rows = await readRows(j0.data, "ppo", "--data", null);
    const { groups } = frozenPassPlan(rows.length, 0, 1, j0.batch, planFirstUpdate(rows.length, j0, 1), false);
    // a frame of the first batch replaced by a file that is no PNG (its stat works, its decoding fails)
    const broken = join(work, "broken-frame.png");
    await writeFile(broken, "not a png");
    const lines = (await readFile(j0.data, "utf8")).trim().split("\n");
    const row = groups[0]![0]!;
    lines[row] = JSON.stringify({ ...(JSON.parse(lines[row]!) as object), image: broken });
    const data = join(work, "broken-first.jsonl");
    await writeFile(data, lines.join("\n") + "\n");
    const early = (await collateFirstFrozenBatches(new ModelAssets(join(fx, "model")), job("never", "ppo", "ref", data)))!;
    expect(early).toHaveLength(EARLY_BATCHES);
    await expect(early[0]).rejects.toThrow();
    expect((await early[1]!).indices).toEqual(groups[1]);
  });
});
