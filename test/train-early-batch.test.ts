// A one-shot PPO job's first frozen batch, collated while the model loads (src/train/early-batch.ts), on the CPU
// build and the tiny Qwen3.5 of the trainer fixture. What must hold: the batch holds the rows the job's frozen pass
// asks for first (with a reference of its own and with the policy as its reference), the job takes it instead of
// collating those rows again, its files are a plain run's bit for bit, and an early batch that failed or holds other
// rows costs the job nothing: it collates the batch itself.
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ModelSpec, TrainJob } from "../src/contract/index.js";
import { collateFirstFrozenBatch, type EarlyBatch } from "../src/train/early-batch.js";
import { planFirstUpdate } from "../src/train/first-update.js";
import { frozenPassPlan } from "../src/train/frozen-pass.js";
import { ModelAssets } from "../src/train/model-assets.js";
import { jobFromFlags } from "../src/train/one-shot.js";
import { readRows } from "../src/train/rows.js";
import { loadModelWithAssets, runJob } from "../src/train/run-job.js";
import { trainFixture } from "./helpers/train-run.js";

type Line = Record<string, unknown>;

function capture(lines: Line[]) {
  return pino({ level: "info" }, { write: (text: string) => void lines.push(JSON.parse(text) as Line) });
}

describe("train early batch - a one-shot PPO job's first frozen batch collated beside the load", () => {
  let fx: string;
  let work: string;
  const spec = (): ModelSpec => ({ dir: join(fx, "model"), device: "cpu", dtype: "float32", checkpointing: "auto", tf32: "auto", attention: "flash" });
  const job = (out: string, kind: "ppo" | "sft" = "ppo", ref = "ref"): TrainJob =>
    jobFromFlags(kind, {
      data: join(fx, `${kind}.jsonl`), adapter: join(fx, "seed-round"), ref: join(fx, ref), prompt: join(fx, "prompt.jinja"),
      out: join(work, out), batch: 2, accumulation: 2, lr: 3e-5, seed: 0, model: join(fx, "model"),
      checkpointing: "auto", tf32: "auto", attention: "flash", mismatchStats: false,
    });

  /** Runs `job(out)` on a freshly loaded model with `early`; returns the frozen pass's log line. */
  const runWith = async (out: string, early?: Promise<EarlyBatch | null>): Promise<Line> => {
    const { model, assets } = await loadModelWithAssets(spec());
    const lines: Line[] = [];
    try {
      await runJob({ rank: 0, world: 1, group: null, log: capture(lines) }, model, assets, job(out), early);
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
    for (const file of ["adapter_model.safetensors", "optimizer.safetensors", "logp_gaps.json"])
      // a boolean, not the buffers: a failing toEqual on two files of this size takes minutes to print its diff
      expect((await readFile(join(work, out, file))).equals(await readFile(join(work, "plain", file))), file).toBe(true);
    const stats = async (dir: string) => {
      const { train_s: _, ...rest } = JSON.parse(await readFile(join(work, dir, "stats.json"), "utf8")) as Line;
      return rest;
    };
    expect(await stats(out)).toEqual(await stats("plain"));
  };

  beforeAll(async () => {
    fx = await trainFixture();
    work = await mkdtemp(join(tmpdir(), "rlloop-early-batch-"));
  });
  afterAll(async () => {
    await rm(work, { recursive: true, force: true });
  });

  it("holds the frozen pass's first rows, with a reference of its own and with the policy as its reference; none for SFT", async () => {
    const assets = new ModelAssets(join(fx, "model"));
    const rows = await readRows(join(fx, "ppo.jsonl"), "ppo", "--data", null);
    expect(rows.length).toBeGreaterThan(4); // more rows than the first update's and a batch: the orders differ
    for (const [ref, refIsPolicy] of [["ref", false], ["seed-round", true]] as const) {
      const j = job("never", "ppo", ref);
      const early = (await collateFirstFrozenBatch(assets, j))!;
      const { groups } = frozenPassPlan(rows.length, 0, 1, j.batch, planFirstUpdate(rows.length, j, 1), refIsPolicy);
      expect(early.indices, ref).toEqual(groups[0]);
      // every frame with its pixels and its cache key: the fresh model holds no features yet
      for (const input of early.inputs) expect(input.images.map((i) => [i.pixelValues !== undefined, typeof i.cacheKey])).toEqual([[true, "string"]]);
    }
    expect(await collateFirstFrozenBatch(assets, job("never", "sft"))).toBeNull();
  });

  it("a job given it does not collate those rows again, and its files are a plain run's bit for bit", async () => {
    const loaded = await loadModelWithAssets(spec(), { job: job("early"), log: capture([]) });
    expect(loaded.early).toBeDefined();
    const lines: Line[] = [];
    try {
      await runJob({ rank: 0, world: 1, group: null, log: capture(lines) }, loaded.model, loaded.assets, job("early"), loaded.early);
    } finally {
      await loaded.model.close();
    }
    expect(lines.find((l) => l.msg === "ppo fixed log-probs")!.firstBatchS).toMatchObject({ collatedEarly: true });
    expect((await plain()).firstBatchS).toMatchObject({ collatedEarly: false });
    await expectSameOutputs("early");
  });

  it("an early batch that failed, or that holds other rows, is collated again by the job, with the same files", async () => {
    const failed = Promise.reject(new Error("a frame could not be read"));
    failed.catch(() => undefined);
    expect((await runWith("early-failed", failed)).firstBatchS).toMatchObject({ collatedEarly: false });
    await expectSameOutputs("early-failed");
    const assets = new ModelAssets(join(fx, "model"));
    const other = (await collateFirstFrozenBatch(assets, job("never", "ppo", "seed-round")))!; // the other reference's rows
    const ours = (await collateFirstFrozenBatch(assets, job("never")))!;
    expect(other.indices).not.toEqual(ours.indices);
    expect((await runWith("early-other-rows", Promise.resolve(other))).firstBatchS).toMatchObject({ collatedEarly: false });
    await expectSameOutputs("early-other-rows");
  });
});
