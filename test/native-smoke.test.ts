// Smoke tests of the native module's own behaviour on the tiny checkpoints of scripts/reference/tiny_model.py
// (config a: float32, one file; config b: bfloat16 shards with an index): load, forward, backward, gradient
// checkpointing, adapters on disk, the optimizer and its state, process groups, and errors surfacing as JS Errors.
// Numerical agreement with transformers / PEFT lives in native-conformance and native-lora; here the references
// are the module itself under another arrangement (a row alone vs in a padded batch, checkpointing on vs off, a
// saved-and-reloaded adapter or optimizer vs the original).
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import getPort from "get-port";
import { Model, Optimizer, ProcessGroup, type NamedTensors, type RowInput } from "../src/native.js";
import { pythonFixture } from "./helpers/fixture-cache.js";

const SEED_TARGETS =
  "model.language_model.*\\.(q_proj|k_proj|v_proj|o_proj|in_proj_qkv|in_proj_z|in_proj_b|in_proj_a|out_proj|gate_proj|up_proj|down_proj)$";
const HYPER = { lr: 1e-2, betas: [0.9, 0.999] as [number, number], eps: 1e-8, weightDecay: 0.01 };

/** Deterministic pseudo-random ints / floats (mulberry32), so rows and adapter values are the same every run. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Text-only rows of the given lengths (ids below 990: clear of the vision specials 998..1001), K = 4. */
function textRows(lengths: number[], seed: number): RowInput[] {
  const next = random(seed);
  return lengths.map((n) => ({
    inputIds: Int32Array.from({ length: n }, () => Math.floor(next() * 990)),
    images: [],
    scoreStart: n - 4,
    scoreCount: 4,
  }));
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

/** Max over tensors of ‖a − b‖ / max(‖b‖, 1e-12). */
function maxRelDiff(a: NamedTensors, b: NamedTensors): number {
  expect(Object.keys(a).sort()).toEqual(Object.keys(b).sort());
  let worst = 0;
  for (const [key, t] of Object.entries(b)) {
    let diff = 0, norm = 0;
    for (let i = 0; i < t.data.length; i++) {
      diff += (a[key]!.data[i]! - t.data[i]!) ** 2;
      norm += t.data[i]! ** 2;
    }
    worst = Math.max(worst, Math.sqrt(diff) / Math.max(Math.sqrt(norm), 1e-12));
  }
  return worst;
}

/** Every A and B drawn from U(−0.2, 0.2), so that every LoRA tensor gets a gradient (B = 0 would zero A's). */
function randomAdapterValues(tensors: NamedTensors, seed: number): NamedTensors {
  const next = random(seed);
  const out: NamedTensors = {};
  for (const [key, t] of Object.entries(tensors)) out[key] = { shape: t.shape, data: t.data.map(() => (next() - 0.5) * 0.4) };
  return out;
}

/** A safetensors file's float32 tensors, read here by hand (8-byte header length, JSON header, data section). */
async function readSafetensors(path: string): Promise<Record<string, Float32Array>> {
  const bytes = await readFile(path);
  const headerLength = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString("utf8")) as Record<
    string,
    { dtype: string; data_offsets: [number, number] }
  >;
  const out: Record<string, Float32Array> = {};
  for (const [key, entry] of Object.entries(header)) {
    if (key === "__metadata__") continue;
    expect(entry.dtype).toBe("F32");
    const [begin, end] = entry.data_offsets.map((o) => 8 + headerLength + o) as [number, number];
    out[key] = new Float32Array(bytes.buffer.slice(bytes.byteOffset + begin, bytes.byteOffset + end));
  }
  return out;
}

const tinyModel = (config: "a" | "b") => pythonFixture({ name: `tiny-${config}`, script: "tiny_model.py", args: ["--config", config, "--seed", "0"] });

let dirA: string;
let work: string;
beforeAll(async () => {
  dirA = await tinyModel("a");
  work = await mkdtemp(join(tmpdir(), "rlloop-native-smoke-"));
});
afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

describe("native smoke - loading and forward", () => {
  test("info summarises config a: 8 layers L L L F, 62 LoRA-capable modules, token ids, vision sizes", async () => {
    const model = await Model.load(dirA, { device: "cpu", dtype: "float32" });
    const { info } = model;
    expect(info.numLayers).toBe(8);
    expect(info.layerTypes).toEqual(["linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention"]);
    expect(info.hiddenSize).toBe(64);
    expect(info.vocabSize).toBe(1024);
    expect(info.imageTokenId).toBe(1000);
    expect(info.vision).toMatchObject({ patchSize: 16, temporalPatchSize: 2, mergeSize: 2 });
    expect(info.loraModules).toHaveLength(6 * 5 + 2 * 4 + 8 * 3);
    expect(info.loraModules[0]).toBe("model.language_model.layers.0.linear_attn.in_proj_qkv");
    expect(model.device).toBe("cpu");
    expect(model.dtype).toBe("float32");
  });

  test("a row's log-probs do not depend on the rows padded beside it (max abs diff <= 1e-5)", async () => {
    const model = await Model.load(dirA, { device: "cpu", dtype: "float32" });
    const rows = textRows([150, 71, 130], 1); // 150 crosses the 64-token GDN chunks; the others are padded
    const together = await model.logprobs(await model.prepare(rows), { adapter: null });
    expect(together.K).toBe(4);
    for (let r = 0; r < rows.length; r++) {
      const alone = await model.logprobs(await model.prepare([rows[r]!]), { adapter: null });
      expect(maxAbsDiff(together.logp.subarray(r * 4, r * 4 + 4), alone.logp)).toBeLessThanOrEqual(1e-5);
      expect(Array.from(together.correct.subarray(r * 4, r * 4 + 4))).toEqual(Array.from(alone.correct));
    }
    for (const v of together.logp) expect(v).toBeLessThan(0);
  });

  test("prepare() runs beside the worker: batches prepared while another computes give the same log-probs", async () => {
    const model = await Model.load(dirA, { device: "cpu", dtype: "float32" });
    const [first, second, third] = [textRows([150, 71], 3), textRows([90, 130], 4), textRows([64], 5)];
    const alone = await model.logprobs(await model.prepare(second), { adapter: null });
    const busy = model.logprobs(await model.prepare(first), { adapter: null }); // the worker computes meanwhile
    const [b2, b3] = await Promise.all([model.prepare(second), model.prepare(third)]);
    const [, overlapped, last] = await Promise.all([busy, model.logprobs(b2, { adapter: null }), model.logprobs(b3, { adapter: null })]);
    expect(Array.from(overlapped.logp)).toEqual(Array.from(alone.logp));
    expect(last.logp).toHaveLength(4);
  });

  test("config b (bfloat16 shards + index, a full-attention layer first) loads as float32 and as bfloat16", async () => {
    const dirB = await tinyModel("b");
    const rows = textRows([40, 33], 2);
    const f32 = await Model.load(dirB, { device: "cpu", dtype: "float32" });
    const bf16 = await Model.load(dirB, { device: "cpu", dtype: "bfloat16" });
    expect(f32.info.layerTypes[0]).toBe("full_attention");
    expect(bf16.dtype).toBe("bfloat16");
    const a = await f32.logprobs(await f32.prepare(rows), { adapter: null });
    const b = await bf16.logprobs(await bf16.prepare(rows), { adapter: null });
    // bf16 activations vs the same bf16-stored weights computed in fp32: bf16-level noise only
    expect(maxAbsDiff(a.logp, b.logp)).toBeLessThan(0.1);
  });
});

describe("native smoke - training", () => {
  test("backward with checkpointing on equals off (every LoRA gradient within 1e-5 relative), sft and ppo", async () => {
    const models = await Promise.all((["off", "on"] as const).map((c) => Model.load(dirA, { device: "cpu", dtype: "float32", checkpointing: c })));
    const rows = textRows([100, 77], 3);
    const grads: NamedTensors[][] = [];
    const recomputed: number[] = [];
    for (const model of models) {
      model.addAdapter("p", { r: 4, alpha: 8, targetModules: SEED_TARGETS, seed: 7 });
      await model.setAdapterTensors("p", randomAdapterValues(await model.adapterTensors("p"), 11));
      model.setTrainable("p");
      const batch = await model.prepare(rows);
      const sft = await model.backward(batch, { kind: "sft", scale: 1 });
      expect(Number.isFinite(sft.loss)).toBe(true);
      const g1 = await model.gradients("p");
      const ppo = await model.backward(batch, {
        kind: "ppo", n: 3, old: Float32Array.from([-9, -8]), ref: new Float32Array(6).fill(-3),
        adv: Float32Array.from([1, -0.5]), clip: 0.2, beta: 0.02, scale: 0.5,
      });
      expect(ppo.ratio).toHaveLength(2);
      recomputed.push(sft.recomputedLayers, ppo.recomputedLayers);
      grads.push([g1, await model.gradients("p")]); // sft, then sft + ppo accumulated
    }
    expect(recomputed).toEqual([0, 0, models[1]!.info.numLayers, models[1]!.info.numLayers]); // off: none; on: every layer
    expect(maxRelDiff(grads[1]![0]!, grads[0]![0]!)).toBeLessThanOrEqual(1e-5);
    expect(maxRelDiff(grads[1]![1]!, grads[0]![1]!)).toBeLessThanOrEqual(1e-5);
    const someA = Object.entries(grads[0]![0]!).find(([k]) => k.endsWith("lora_A.weight"))![1];
    expect(someA.data.some((v) => v !== 0)).toBe(true);
  });

  test("recomputedLayers counts the layers a backward repeated: none under auto on the CPU; under on, only those with a graph", async () => {
    const auto = await Model.load(dirA, { device: "cpu", dtype: "float32", checkpointing: "auto" });
    const on = await Model.load(dirA, { device: "cpu", dtype: "float32", checkpointing: "on" });
    const last = on.info.numLayers - 1;
    const rows = textRows([40, 33], 3);
    for (const model of [auto, on]) {
      // an adapter on the last layer only: the layers before it have no trainable tensor and no gradient to pass
      model.addAdapter("tail", { r: 2, alpha: 4, targetModules: `model\\.language_model\\.layers\\.${last}\\..*_proj$`, seed: 3 });
      model.setTrainable("tail");
    }
    expect((await auto.backward(await auto.prepare(rows), { kind: "sft", scale: 1 })).recomputedLayers).toBe(0);
    expect((await on.backward(await on.prepare(rows), { kind: "sft", scale: 1 })).recomputedLayers).toBe(1);
  });

  test("saveAdapter writes the PEFT layout; loadAdapter gives back the same tensors and log-probs", async () => {
    const model = await Model.load(dirA, { device: "cpu", dtype: "float32" });
    model.addAdapter("x", { r: 2, alpha: 6, targetModules: SEED_TARGETS, seed: 3 });
    await model.setAdapterTensors("x", randomAdapterValues(await model.adapterTensors("x"), 5));
    const dir = join(work, "adapter-x");
    await model.saveAdapter("x", dir);
    const config = JSON.parse(await readFile(join(dir, "adapter_config.json"), "utf8"));
    expect(config).toMatchObject({ peft_type: "LORA", r: 2, lora_alpha: 6, lora_dropout: 0, target_modules: SEED_TARGETS,
      bias: "none", use_rslora: false, use_dora: false, modules_to_save: null, task_type: "CAUSAL_LM" });
    await model.loadAdapter("y", dir);
    expect(model.adapterNames().sort()).toEqual(["x", "y"]);
    expect(maxRelDiff(await model.adapterTensors("y"), await model.adapterTensors("x"))).toBe(0);
    const batch = await model.prepare(textRows([60, 50], 4));
    const [x, y, base] = await Promise.all([
      model.logprobs(batch, { adapter: "x" }), model.logprobs(batch, { adapter: "y" }), model.logprobs(batch, { adapter: null }),
    ]);
    expect(maxAbsDiff(x.logp, y.logp)).toBe(0);
    expect(maxAbsDiff(x.logp, base.logp)).toBeGreaterThan(1e-3); // the adapter does something
    model.removeAdapter("y");
    expect(model.adapterNames()).toEqual(["x"]);
    await model.loadAdapter("y", dir); // the name is free again
  });

  test("optimizer: a step moves the adapter; save + load into a fresh optimizer continues identically (exact)", async () => {
    const model = await Model.load(dirA, { device: "cpu", dtype: "float32" });
    const batch = await model.prepare(textRows([70, 66], 6));
    model.addAdapter("p", { r: 4, alpha: 8, targetModules: SEED_TARGETS, seed: 1 });
    model.setTrainable("p");
    const start = await model.adapterTensors("p");
    const first = new Optimizer(model, "p", HYPER);
    await model.backward(batch, { kind: "sft", scale: 1 });
    const { gradNorm } = await first.step({ lr: 1e-2, maxGradNorm: 1 });
    expect(gradNorm).toBeGreaterThan(0);
    expect(maxRelDiff(await model.adapterTensors("p"), start)).toBeGreaterThan(0);
    const zero = await model.gradients("p"); // grads are set to none by the step
    for (const t of Object.values(zero)) expect(t.data.every((v) => v === 0)).toBe(true);
    const statePath = join(work, "opt", "optimizer.safetensors");
    await first.save(statePath);
    const sidecar = JSON.parse(await readFile(join(work, "opt", "optimizer.json"), "utf8"));
    expect(sidecar).toMatchObject({ step: 1, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0.01 });
    const afterOne = await model.adapterTensors("p");

    // Continue with the original optimizer ...
    await model.backward(batch, { kind: "sft", scale: 1 });
    await first.step({ lr: 1e-2, maxGradNorm: 1 });
    const continued = await model.adapterTensors("p");
    // ... and again from the saved state with a fresh optimizer.
    await model.setAdapterTensors("p", afterOne);
    const second = new Optimizer(model, "p", HYPER);
    await second.load(statePath);
    await model.backward(batch, { kind: "sft", scale: 1 });
    await second.step({ lr: 1e-2, maxGradNorm: 1 });
    expect(maxRelDiff(await model.adapterTensors("p"), continued)).toBe(0);
  });

  test("optimizer.saveWithAdapter: the adapter and the optimizer state in one new directory, files of MiBs written in shares", async () => {
    const model = await Model.load(dirA, { device: "cpu", dtype: "float32" });
    model.addAdapter("p", { r: 64, alpha: 8, targetModules: SEED_TARGETS, seed: 1 });
    model.setTrainable("p");
    const optimizer = new Optimizer(model, "p", HYPER);
    await model.backward(await model.prepare(textRows([70, 66], 6)), { kind: "sft", scale: 1 });
    await optimizer.step({ lr: 1e-2, maxGradNorm: 1 });
    const parent = join(work, "rounds");
    const dir = join(parent, "r1");
    await optimizer.saveWithAdapter(dir, "optimizer.safetensors");
    const files = ["adapter_config.json", "adapter_model.safetensors", "optimizer.json", "optimizer.safetensors"];
    expect((await readdir(dir)).sort()).toEqual(files);
    expect(await readdir(parent)).toEqual(["r1"]); // no temporary directory left
    // Large enough that several threads write each weights file (one a MiB, up to 4).
    expect((await stat(join(dir, "optimizer.safetensors"))).size).toBeGreaterThan(4 << 20);

    const live = await model.adapterTensors("p");
    const written = await readSafetensors(join(dir, "adapter_model.safetensors"));
    expect(Object.keys(written).sort()).toEqual(Object.keys(live).sort());
    for (const [key, t] of Object.entries(live)) expect(maxAbsDiff(written[key]!, t.data)).toBe(0);
    const state = await readSafetensors(join(dir, "optimizer.safetensors"));
    expect(Object.keys(state).sort()).toEqual(Object.keys(live).flatMap((k) => [`${k}.exp_avg`, `${k}.exp_avg_sq`]).sort());
    expect(JSON.parse(await readFile(join(dir, "optimizer.json"), "utf8"))).toMatchObject({ step: 1 });

    // The same bytes as the two separate saves, and again into the existing directory (files replaced one by one).
    await model.saveAdapter("p", join(work, "apart"));
    await optimizer.save(join(work, "apart", "optimizer.safetensors"));
    await optimizer.saveWithAdapter(dir, "optimizer.safetensors");
    expect((await readdir(dir)).sort()).toEqual(files);
    for (const file of files)
      expect((await readFile(join(dir, file))).equals(await readFile(join(work, "apart", file))), file).toBe(true);
    await expect(optimizer.saveWithAdapter(dir, "../escape")).rejects.toThrow(/file name without '\/'/);
  });

  test("process group: two ranks in one process sum and average, and agree on a barrier", async () => {
    const port = 20000 + Math.floor(Math.random() * 20000);
    const groups = await Promise.all([0, 1].map((rank) =>
      ProcessGroup.init({ backend: "gloo", rank, worldSize: 2, masterAddr: "127.0.0.1", masterPort: port, device: "cpu", timeoutS: 60 })));
    const sums = await Promise.all(groups.map((g) => g.allReduce(Float32Array.from([g.rank + 1, 2 * g.rank]), "sum")));
    const means = await Promise.all(groups.map((g) => g.allReduce(Float32Array.from([g.rank]), "mean")));
    await Promise.all(groups.map((g) => g.barrier()));
    for (const s of sums) expect(Array.from(s)).toEqual([3, 2]);
    for (const m of means) expect(Array.from(m)).toEqual([0.5]);
    expect(groups.map((g) => [g.rank, g.worldSize])).toEqual([[0, 2], [1, 2]]);
    await Promise.all(groups.map((g) => g.close()));
  });

  test("process group: a collective its peer never issues (a wedged rank) rejects after timeoutS, naming the rank and the operation", async () => {
    const port = await getPort({ host: "127.0.0.1" });
    const groups = await Promise.all([0, 1].map((rank) =>
      ProcessGroup.init({ backend: "gloo", rank, worldSize: 2, masterAddr: "127.0.0.1", masterPort: port, device: "cpu", timeoutS: 2 })));
    const began = performance.now();
    await expect(groups[0]!.allReduce(Float32Array.from([1]), "sum")).rejects.toThrow(/rank 0 of 2: allReduce #0 failed/);
    console.info(`figure: the wedged peer's allReduce rejected after ${((performance.now() - began) / 1000).toFixed(1)} s (timeoutS 2)`);
    await Promise.all(groups.map((g) => g.close()));
  });
});

describe("native smoke - errors are JS Errors and the process survives", () => {
  test("missing model folder, corrupt safetensors header, shape mismatch: rejected with the path and the key", async () => {
    await expect(Model.load(join(work, "nope"))).rejects.toThrow(/model directory not found: '.*nope'/);

    const corrupt = join(work, "corrupt");
    await rm(corrupt, { recursive: true, force: true });
    await import("node:fs/promises").then((fs) => fs.mkdir(corrupt, { recursive: true }));
    await writeFile(join(corrupt, "config.json"), await readFile(join(dirA, "config.json")));
    const bytes = Buffer.alloc(16);
    bytes.writeBigUInt64LE(8n, 0);
    bytes.write("{not json", 8);
    await writeFile(join(corrupt, "model.safetensors"), bytes);
    const err = await Model.load(corrupt).catch((e: unknown) => e as Error & { code?: string });
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/model\.safetensors.*invalid JSON/);
    expect((err as { code?: string }).code).toBe("ERR_RLLOOP_FORMAT");

    const model = await Model.load(dirA, { device: "cpu", dtype: "float32" });
    const batch = await model.prepare(textRows([30], 8));
    model.addAdapter("x", { r: 2, alpha: 4, targetModules: SEED_TARGETS, seed: 0 });
    const tensors = await model.adapterTensors("x");
    const key = Object.keys(tensors)[0]!;
    await expect(model.setAdapterTensors("x", { [key]: { shape: [3, 3], data: new Float32Array(9) } })).rejects.toThrow(
      new RegExp(`${key.replace(/\./g, "\\.")}.*\\[3, 3\\]`),
    );
    await expect(model.logprobs(batch, { adapter: "missing" })).rejects.toThrow(/adapter/);
    await expect(model.backward(batch, { kind: "sft", scale: 1 })).rejects.toThrow(/setTrainable/);
    expect(() => model.addAdapter("z", { r: 2, alpha: 4, targetModules: "visual.*", seed: 0 })).toThrow(/matches no language-model Linear/);
    await expect(model.prepare([{ ...textRows([30], 9)[0]!, scoreStart: 0 }])).rejects.toThrow(/scored tokens/);
    // Still fine after all of that.
    expect((await model.logprobs(batch, { adapter: "x" })).logp).toHaveLength(4);
  });

  test("an adapter of another model (config b's modules on config a) is rejected naming the key", async () => {
    const b = await Model.load(await tinyModel("b"), { device: "cpu", dtype: "float32" });
    b.addAdapter("other", { r: 2, alpha: 4, targetModules: SEED_TARGETS, seed: 0 });
    const dir = join(work, "adapter-of-b");
    await b.saveAdapter("other", dir);
    const a = await Model.load(dirA, { device: "cpu", dtype: "float32" });
    await expect(a.loadAdapter("other", dir)).rejects.toThrow(/base_model\.model\.model\.language_model\.layers\.\d+\..*lora_[AB]\.weight/);
    expect(a.adapterNames()).toEqual([]);
  });
});
