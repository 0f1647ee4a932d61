// The warm-up of a one-shot run (src/train/warm-up.ts): a stand-in model (Model.load's `standIn`: one decoder layer
// of each kind, one vision block, the checkpoint's shapes, zero weights) runs the job's first batch beside
// the real load and is closed before the job starts. Production warms up on CUDA only (the CPU loads nothing lazily);
// here `warmsUp` is forced on, so the same code runs on the CPU build against the tiny Qwen3.5 of the trainer
// fixture. What must hold: the stand-in reads nothing but config.json, close() frees a model and refuses later calls,
// a warm-up changes no value of the job (bit for bit), and a warm-up that fails, or a load that fails beside one,
// costs the job nothing it would not have cost without it.
import { copyFile, cp, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { Model, Optimizer, type LoadOptions } from "../src/native.js";
import type { ModelSpec, TrainJob } from "../src/contract/index.js";
import { jobFromFlags } from "../src/train/one-shot.js";
import { loadModelWithAssets, runJob } from "../src/train/run-job.js";
import { captureLog, expectSamePpoFiles, trainFixture } from "./helpers/train-run.js";

vi.mock("../src/train/warm-up.js", async (importActual) => ({
  ...(await importActual<typeof import("../src/train/warm-up.js")>()),
  warmsUp: () => true,
}));

type Line = Record<string, unknown>;

describe("train warm-up - first-use costs paid on a stand-in beside the load", () => {
  let fx: string;
  let work: string;
  const spec = (dir = join(fx, "model")): ModelSpec => ({ dir, device: "cpu", dtype: "float32", checkpointing: "auto", tf32: "auto", attention: "flash" });
  const job = (out: string): TrainJob =>
    jobFromFlags("ppo", {
      data: join(fx, "ppo.jsonl"), adapter: join(fx, "seed-round"), ref: join(fx, "ref"), prompt: join(fx, "prompt.jinja"),
      out: join(work, out), batch: 2, accumulation: 2, lr: 3e-5, seed: 0, model: join(fx, "model"),
      checkpointing: "auto", tf32: "auto", attention: "flash", mismatchStats: false,
    });
  const loads: { opts: LoadOptions | undefined; model: Promise<Model> }[] = [];

  beforeAll(async () => {
    fx = await trainFixture();
    work = await mkdtemp(join(tmpdir(), "rlloop-warm-up-"));
    const load = Model.load.bind(Model);
    vi.spyOn(Model, "load").mockImplementation((dir, opts) => {
      const model = load(dir, opts);
      loads.push({ opts, model });
      return model;
    });
  });
  afterAll(async () => {
    vi.restoreAllMocks();
    await rm(work, { recursive: true, force: true });
  });

  it("RLLOOP_WARM_UP: on CUDA unless \"off\"; the CPU never; a value that is neither is refused", async () => {
    const { warmsUp } = await vi.importActual<typeof import("../src/train/warm-up.js")>("../src/train/warm-up.js");
    const cuda: ModelSpec = { ...spec(), device: "cuda:0" };
    expect([warmsUp(cuda, {}), warmsUp(cuda, { RLLOOP_WARM_UP: "on" }), warmsUp(cuda, { RLLOOP_WARM_UP: "off" }), warmsUp(spec(), {})]).toEqual([true, true, false, false]);
    // a run that traces its steps sees them as they are (and no second model's tasks in its traces)
    expect(["RLLOOP_PROFILE_WINDOWS", "RLLOOP_PROFILE_TRACE", "RLLOOP_BACKWARD_TIMELINE"].map((name) => warmsUp(cuda, { [name]: "x" }))).toEqual([false, false, false]);
    expect(() => warmsUp(cuda, { RLLOOP_WARM_UP: "of" })).toThrow(/RLLOOP_WARM_UP must be "on" or "off", got "of"/);
  });

  it("a stand-in has the checkpoint's shapes, one decoder layer of each kind and one vision block, and reads only config.json", async () => {
    const only = join(work, "config-only");
    await mkdir(only);
    await copyFile(join(fx, "model", "config.json"), join(only, "config.json"));
    const real = await Model.load(join(fx, "model"));
    const standIn = await Model.load(only, { standIn: true });
    const kinds = [...new Set(real.info.layerTypes)];
    expect(kinds.length).toBeGreaterThan(1); // the fixture's stack has both kinds, so the test sees both
    expect(standIn.info.layerTypes).toEqual(kinds);
    expect(standIn.info.numLayers).toBe(kinds.length);
    expect(standIn.info.vision?.depth).toBe(1);
    const { numLayers, layerTypes, vision, loraModules, ...shapes } = real.info;
    expect(standIn.info).toMatchObject({ ...shapes, vision: { ...vision, depth: 1 } });
    // the LoRA modules of its layers are the real model's first layers' (the same projections of each kind)
    const layerOf = (path: string) => Number(/\.layers\.(\d+)\./.exec(path)![1]);
    const firstOfKind = kinds.map((k) => layerTypes.indexOf(k));
    const expected = loraModules
      .filter((p) => firstOfKind.includes(layerOf(p)))
      .map((p) => p.replace(/\.layers\.(\d+)\./, (_, i: string) => `.layers.${firstOfKind.indexOf(Number(i))}.`));
    expect([...standIn.info.loraModules].sort()).toEqual(expected.sort());
    await Promise.all([real.close(), standIn.close()]);
    await expect(Model.load(join(fx, "model"), { standIn: "yes" as unknown as boolean })).rejects.toThrow(/standIn must be a boolean/);
  });

  it("close(): calls made before it finish, later ones are refused, closing again does nothing", async () => {
    const model = await Model.load(join(fx, "model"));
    model.addAdapter("a", { r: 2, alpha: 4, targetModules: ".*q_proj", seed: 0 });
    const before = model.adapterTensors("a");
    await model.close();
    expect(() => new Optimizer(model, "a", { lr: 1e-4, betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0 })).toThrow(/closed/);
    expect(Object.keys(await before).length).toBeGreaterThan(0);
    await expect(model.adapterTensors("a")).rejects.toMatchObject({ code: "ERR_RLLOOP_INVALID", message: /closed/ });
    expect(() => model.addAdapter("b", { r: 2, alpha: 4, targetModules: ".*q_proj", seed: 0 })).toThrow(/closed/);
    expect(() => model.visionCached("k")).toThrow(/closed/);
    expect(() => model.adapterNames()).toThrow(/closed/);
    expect(model.info.numLayers).toBeGreaterThan(0); // read at the load
    await model.close();
  });

  const run = async (loaded: Awaited<ReturnType<typeof loadModelWithAssets>>, out: string) => {
    await runJob({ rank: 0, world: 1, group: null, log: captureLog([]) }, loaded.model, loaded.assets, job(out), loaded.early);
    await loaded.model.close();
  };
  /** The job without a warm-up, run once, when a test first needs it (after the warmed run in the file's order). */
  let plainRun: Promise<void> | null = null;
  const plain = () => (plainRun ??= loadModelWithAssets(spec()).then((loaded) => run(loaded, "plain")));
  /** `out`'s files equal the plain job's, bit for bit, stats.json but its seconds. */
  const expectSameOutputs = async (out: string) => {
    await plain();
    await expectSamePpoFiles(join(work, out), join(work, "plain"));
  };

  it("a warm-up beside the load changes no value of the job: adapter, optimizer state and stats bit for bit", async () => {
    // the warmed run first: whatever a warm-up left in the process would reach the plain run too, if it ran second
    const lines: Line[] = [];
    loads.length = 0;
    const warmed = await loadModelWithAssets(spec(), { job: job("warmed"), log: captureLog(lines) });
    expect(loads.map((l) => l.opts?.standIn ?? false)).toEqual([false, true]); // the real load is issued first
    await expect((await loads[1]!.model).clearVisionCache()).rejects.toThrow(/closed/); // closed before the model came
    expect(lines.map((l) => l.msg)).toEqual(["warm-up done", "model loaded"]);
    expect(Object.keys(lines[0]!.phasesS as object)).toEqual(["standIn", "batch", "logprobs", "backward", "step"]);
    await run(warmed, "warmed");
    await expectSameOutputs("warmed");
  });

  it("a warm-up that fails halfway is logged, its stand-in closed, and the job's values are as without it", async () => {
    const lines: Line[] = [];
    loads.length = 0;
    const backward = vi.spyOn(Model.prototype, "backward").mockRejectedValueOnce(new Error("the stand-in's backward broke"));
    const loaded = await loadModelWithAssets(spec(), { job: job("after-failed-warm-up"), log: captureLog(lines) });
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [40, "warm-up failed; the job pays its first-use costs itself"],
      [30, "model loaded"],
    ]);
    expect(lines[0]!.phasesS).toMatchObject({ standIn: expect.any(Number), logprobs: expect.any(Number) });
    await expect((await loads[1]!.model).clearVisionCache()).rejects.toThrow(/closed/);
    expect(loads).toHaveLength(2); // the real load did not fail: nothing loaded again
    backward.mockRestore();
    await run(loaded, "after-failed-warm-up");
    await expectSameOutputs("after-failed-warm-up");
  });

  it("rows that pass their schema but whose frames cannot be read fail the warm-up, not the load: the job reports them", async () => {
    const lines: Line[] = [];
    const rows = (await readFile(join(fx, "ppo.jsonl"), "utf8")).replaceAll(/"image": "[^"]*"/g, `"image": "${join(work, "gone.png")}"`);
    const data = join(work, "frames-gone.jsonl");
    await writeFile(data, rows);
    const broken = { ...job("frames-gone"), data };
    const loaded = await loadModelWithAssets(spec(), { job: broken, log: captureLog(lines) });
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [40, "warm-up failed; the job pays its first-use costs itself"],
      [30, "model loaded"],
    ]);
    // the frozen pass's first batch, collated beside the load, failed too: the job collates it and reports them
    await expect(runJob({ rank: 0, world: 1, group: null, log: captureLog([]) }, loaded.model, loaded.assets, broken, loaded.early)).rejects.toThrow(/gone\.png/);
    await loaded.model.close();
  });

  it("a load that runs out of device memory beside the stand-in is made again alone, after the stand-in is closed", async () => {
    const lines: Line[] = [];
    loads.length = 0;
    const load = vi.mocked(Model.load).getMockImplementation()!;
    vi.mocked(Model.load).mockImplementationOnce((dir, opts) => {
      void load(dir, opts).then((m) => m.close()); // recorded as the first load; its model is not the one returned
      return Promise.reject(Object.assign(new Error("Model.load: out of memory: (stand-in beside it)"), { code: "ERR_RLLOOP_OOM" }));
    });
    const loaded = await loadModelWithAssets(spec(), { job: job("never"), log: captureLog(lines) });
    expect(loads.map((l) => l.opts?.standIn ?? false)).toEqual([false, true, false]);
    expect(lines.map((l) => l.msg)).toEqual([
      "warm-up done",
      "the model's load ran out of device memory beside the warm-up's stand-in; loading it again alone",
      "model loaded",
    ]);
    expect(loaded.model.info.numLayers).toBeGreaterThan(1);
    await loaded.model.close();
  });

  it("a load that fails beside a warm-up reports the load's error once the stand-in is closed", async () => {
    const configOnly = join(work, "no-weights");
    await cp(join(fx, "model"), configOnly, { recursive: true });
    await rm(join(configOnly, "model.safetensors"), { force: true });
    await rm(join(configOnly, "model.safetensors.index.json"), { force: true });
    loads.length = 0;
    const lines: Line[] = [];
    await expect(loadModelWithAssets(spec(configOnly), { job: job("never"), log: captureLog(lines) })).rejects.toThrow(/no model\.safetensors/);
    expect(lines.map((l) => l.msg)).toEqual(["warm-up done"]); // the stand-in needs config.json alone
    const standIn = await loads.find((l) => l.opts?.standIn)!.model;
    expect(() => standIn.visionCached("k")).toThrow(/closed/);
  });
});
