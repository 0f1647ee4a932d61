// LoRA in the native module against PEFT 0.21 on the tiny checkpoints (fp32, TF32 off): PEFT's saved adapter
// (r 4 / alpha 12 on "a", r 8 / alpha 16 on "b", the seed's target regex, every A and B random) loads and gives
// PEFT's log-probs; the seed's PPO and SFT objectives give PEFT's gradient for every LoRA tensor; an adapter saved
// by the module loads in PEFT and means the same there; the optimizer step equals torch.optim.AdamW with
// clip_grad_norm_. The Python references are scripts/reference/{lora_golden,peft_logprobs,adamw_golden}.py.
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Model, Optimizer, type Batch, type NamedTensors } from "../src/native.js";
import { absDiff, expectAllClose, expectRelClose } from "./helpers/compare.js";
import {
  BATCH_NAMES, MODEL_NAMES, conformanceFixtures, goldenRowInputs,
  type BatchName, type ConformanceFixtures, type LoraGolden,
} from "./helpers/conformance.js";
import { FIXTURE_ROOT, pythonFixture, sha256 } from "./helpers/fixture-cache.js";
import { floatTensor, readSafetensors, writeSafetensors } from "./helpers/safetensors.js";

const ATOL = 1e-4; // log-probs, loss and per-row statistics vs PEFT
const GRAD_RTOL = 1e-4; // ‖g − g_ref‖ / ‖g_ref‖ per LoRA tensor
const ADAMW_RTOL = 1e-6; // ‖p − p_ref‖ / ‖p_ref‖ per tensor after each step, and the gradient norm

function memo<K, V>(make: (key: K) => Promise<V>): (key: K) => Promise<V> {
  const cache = new Map<K, Promise<V>>();
  return (key) => {
    if (!cache.has(key)) cache.set(key, make(key));
    return cache.get(key)!;
  };
}

/** Deterministic uniform draws in [lo, hi) (mulberry32), for adapter values the test sets itself. */
function uniforms(seed: number, n: number, lo: number, hi: number): Float32Array {
  let s = seed >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    out[i] = lo + (hi - lo) * (((t ^ (t >>> 14)) >>> 0) / 4294967296);
  }
  return out;
}

function entries(t: NamedTensors): [string, { shape: number[]; data: Float32Array }][] {
  return Object.entries(t).sort(([a], [b]) => a.localeCompare(b));
}

function expectGradients(label: string, grads: NamedTensors, lora: LoraGolden, tag: "ppo" | "sft", factor = 1): void {
  expect(Object.keys(grads).sort(), `${label}: gradient keys`).toEqual(lora.keys);
  // Every tensor is checked before failing, so the message lists all that are off, worst first.
  const bad: string[] = [];
  for (const key of lora.keys) {
    const ref = floatTensor(lora.tensors, `grad.${tag}.${key}`);
    const expected = factor === 1 ? ref.data : ref.data.map((v: number) => v * factor);
    const g = grads[key]!;
    expect(g.shape, `${label}: shape of ${key}`).toEqual(ref.shape);
    let diff = 0, norm = 0;
    for (let i = 0; i < expected.length; i++) {
      diff += (g.data[i]! - expected[i]!) ** 2;
      norm += expected[i]! ** 2;
    }
    const rel = Math.sqrt(diff) / Math.sqrt(norm);
    if (!(rel <= GRAD_RTOL)) {
      const d = absDiff(g.data, expected, ref.shape);
      bad.push(`${rel.toExponential(2)}  ${key} [${ref.shape}]: ‖g_ref‖ ${Math.sqrt(norm).toExponential(2)}, worst ` +
        `[${d.at}] actual ${d.actual} expected ${d.expected}`);
    }
  }
  bad.sort().reverse();
  expect(bad, `${label}: ${bad.length}/${lora.keys.length} LoRA gradients off by more than ${GRAD_RTOL} relative ` +
    `(‖g − g_ref‖/‖g_ref‖, PEFT keys):\n  ${bad.join("\n  ")}`).toEqual([]);
}

describe.each(MODEL_NAMES)("native LoRA - tiny model %s vs PEFT (fp32)", (name) => {
  let fx: ConformanceFixtures;
  let model: Model;
  let lora: LoraGolden;
  let scratch: string;
  const prepared = memo(async (b: BatchName): Promise<Batch> => model.prepare(await goldenRowInputs(fx, name, await fx.batch(name, b))));
  const peftAdapter = memo(async (adapter: string): Promise<string> => {
    await model.loadAdapter(adapter, lora.adapterDir);
    return adapter;
  });

  beforeAll(async () => {
    fx = await conformanceFixtures();
    lora = await fx.lora(name);
    model = await Model.load(fx.modelDir(name), { device: "cpu", dtype: "float32", checkpointing: "off" });
    scratch = await mkdtemp(join(tmpdir(), `rlloop-lora-${name}-`));
  });
  afterAll(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  test("loadAdapter of PEFT's save_pretrained: keys and tensors equal the file bit for bit", async () => {
    const adapter = await peftAdapter("peft");
    expect(model.adapterNames()).toContain(adapter);
    const file = await readSafetensors(join(lora.adapterDir, "adapter_model.safetensors"));
    const loaded = await model.adapterTensors(adapter);
    expect(Object.keys(loaded).sort()).toEqual(lora.keys);
    for (const key of lora.keys) {
      const ref = floatTensor(file, key);
      expect(loaded[key]!.shape, `shape of ${key}`).toEqual(ref.shape);
      expectAllClose(`adapter tensor ${key}`, loaded[key]!.data, ref.data, ref.shape, 0);
    }
  });

  test("loadAdapter of a file mixing float32 and bfloat16 tensors: each tensor as stored, bfloat16 widened exactly", async () => {
    // the loader uploads a file's data section at once and splits it by each entry's own dtype and offset
    const file = await readSafetensors(join(lora.adapterDir, "adapter_model.safetensors"));
    const mixed = new Map(lora.keys.map((key, i) => {
      const t = floatTensor(file, key);
      return [key, { shape: t.shape, data: t.data, dtype: i % 2 === 0 ? ("BF16" as const) : ("F32" as const) }];
    }));
    const dir = join(scratch, "mixed-dtypes");
    await mkdir(dir, { recursive: true });
    await cp(join(lora.adapterDir, "adapter_config.json"), join(dir, "adapter_config.json"));
    await writeSafetensors(join(dir, "adapter_model.safetensors"), mixed);
    const stored = await readSafetensors(join(dir, "adapter_model.safetensors")); // bf16 read back widened
    await model.loadAdapter("mixed", dir);
    const loaded = await model.adapterTensors("mixed");
    model.removeAdapter("mixed");
    for (const key of lora.keys) {
      const ref = floatTensor(stored, key);
      expectAllClose(`adapter tensor ${key} (${mixed.get(key)!.dtype})`, loaded[key]!.data, ref.data, ref.shape, 0);
    }
    // (and the bfloat16 entries really are rounded: the check above is not float32 against itself)
    const rounded = lora.keys.filter((key, i) => i % 2 === 0 && floatTensor(stored, key).data.some((v, j) => v !== floatTensor(file, key).data[j]));
    expect(rounded.length).toBeGreaterThan(0);
  });

  test("loadAdapter of a file whose data section is not 8-byte aligned (header not padded): tensors equal the file's", async () => {
    // (the one-copy path needs every entry aligned for its dtype where it lies; this file takes the per-tensor one)
    const file = await readSafetensors(join(lora.adapterDir, "adapter_model.safetensors"));
    const dir = join(scratch, "unpadded");
    await mkdir(dir, { recursive: true });
    await cp(join(lora.adapterDir, "adapter_config.json"), join(dir, "adapter_config.json"));
    await writeSafetensors(join(dir, "adapter_model.safetensors"), new Map(lora.keys.map((key) => { const { shape, data } = floatTensor(file, key); return [key, { shape, data }]; })), { misalignData: true });
    await model.loadAdapter("unpadded", dir);
    const loaded = await model.adapterTensors("unpadded");
    model.removeAdapter("unpadded");
    for (const key of lora.keys) {
      const ref = floatTensor(file, key);
      expectAllClose(`adapter tensor ${key}`, loaded[key]!.data, ref.data, ref.shape, 0);
    }
  });

  test.each(BATCH_NAMES)("%s: log-probs with PEFT's adapter within 1e-4 abs of PEFT's", async (b) => {
    const adapter = await peftAdapter("peft");
    const golden = await fx.batch(name, b);
    const { logp, K } = await model.logprobs(await prepared(b), { adapter });
    golden.rows.forEach((_, r) => {
      const ref = floatTensor(lora.tensors, `logp.${b}.row.${r}`);
      expectAllClose(`row ${r} log-probs with the adapter`, logp.subarray(r * K, (r + 1) * K), ref.data, [K], ATOL);
    });
  });

  test("adapter: null after loading an adapter still gives transformers' base log-probs within 1e-4 abs", async () => {
    await peftAdapter("peft");
    const golden = await fx.batch(name, "rows");
    const { logp, K } = await model.logprobs(await prepared("rows"), { adapter: null });
    golden.rows.forEach((_, r) => {
      const ref = floatTensor(golden.tensors, `row.${r}.logp`);
      expectAllClose(`row ${r} base log-probs`, logp.subarray(r * K, (r + 1) * K), ref.data, [K], ATOL);
    });
  });

  test("ppo backward: loss, ratio, pg, kl within 1e-4 abs; every LoRA gradient within 1e-4 relative of PEFT's", async () => {
    const adapter = await peftAdapter("ppo");
    model.setTrainable(adapter);
    const p = lora.ppo;
    const result = await model.backward(await prepared(lora.gradBatch), {
      kind: "ppo", n: p.n, old: Float32Array.from(p.old), ref: Float32Array.from(p.ref), adv: Float32Array.from(p.adv),
      weight: Float32Array.from(p.weight), clip: p.clip, beta: p.beta, scale: p.scale,
    });
    const B = p.adv.length;
    expectAllClose("ppo loss", [result.loss], [p.loss], [1], ATOL);
    expectAllClose("ppo ratio per row", result.ratio!, p.ratio, [B], ATOL);
    expectAllClose("ppo pg per row", result.pg!, p.pg, [B], ATOL);
    expectAllClose("ppo kl per row", result.kl!, p.kl, [B], ATOL);
    expectGradients("ppo", await model.gradients(adapter), lora, "ppo");
  });

  test("sft backward: loss within 1e-4 abs, gradients within 1e-4 relative; a second backward accumulates (2x)", async () => {
    const adapter = await peftAdapter("sft");
    model.setTrainable(adapter);
    const batch = await prepared(lora.gradBatch);
    const first = await model.backward(batch, { kind: "sft", scale: lora.sft.scale });
    expectAllClose("sft loss", [first.loss], [lora.sft.loss], [1], ATOL);
    expectGradients("sft, one backward", await model.gradients(adapter), lora, "sft");
    await model.backward(batch, { kind: "sft", scale: lora.sft.scale });
    expectGradients("sft, two backwards accumulated", await model.gradients(adapter), lora, "sft", 2);
  });

  test("ppo and sft backward with gradient checkpointing on: gradients within 1e-4 relative of PEFT's", async () => {
    const recomputing = await Model.load(fx.modelDir(name), { device: "cpu", dtype: "float32", checkpointing: "on" });
    const batch = await recomputing.prepare(await goldenRowInputs(fx, name, await fx.batch(name, lora.gradBatch)));
    const p = lora.ppo;
    await recomputing.loadAdapter("ppo", lora.adapterDir);
    recomputing.setTrainable("ppo");
    await recomputing.backward(batch, {
      kind: "ppo", n: p.n, old: Float32Array.from(p.old), ref: Float32Array.from(p.ref), adv: Float32Array.from(p.adv),
      weight: Float32Array.from(p.weight), clip: p.clip, beta: p.beta, scale: p.scale,
    });
    expectGradients("ppo, checkpointing on", await recomputing.gradients("ppo"), lora, "ppo");
    await recomputing.loadAdapter("sft", lora.adapterDir);
    recomputing.setTrainable("sft");
    await recomputing.backward(batch, { kind: "sft", scale: lora.sft.scale });
    expectGradients("sft, checkpointing on", await recomputing.gradients("sft"), lora, "sft");
  });

  test("an adapter on some members of a grouped projection only: log-probs within 1e-5 and gradients within 1e-4 of the full path's", async () => {
    // The grouped projections (GDN in_proj_qkv/z/b/a, attention q/k/v, MLP gate/up: one GEMM each) run an adapter
    // that names only some members one member at a time. Reference: an adapter on every module holding the same
    // A and B where the partial one has them and B = 0 elsewhere (the same function), through the grouped path
    // that the tests above check against PEFT.
    const partialTargets = "model.language_model.*\\.(q_proj|v_proj|in_proj_z|in_proj_a|up_proj)$";
    model.addAdapter("partial", { r: 4, alpha: 8, targetModules: partialTargets, seed: 3 });
    model.addAdapter("everywhere", { r: 4, alpha: 8, targetModules: lora.targetModules, seed: 3 });
    const partial: NamedTensors = {};
    for (const [i, [key, t]] of entries(await model.adapterTensors("partial")).entries()) {
      partial[key] = { shape: t.shape, data: uniforms(500 + i, t.data.length, -0.3, 0.3) };
    }
    const everywhere: NamedTensors = {};
    for (const [key, t] of entries(await model.adapterTensors("everywhere"))) {
      everywhere[key] = partial[key] ?? { shape: t.shape, data: key.endsWith("lora_A.weight") ? uniforms(9, t.data.length, -0.3, 0.3) : new Float32Array(t.data.length) };
    }
    expect(Object.keys(partial).length).toBeGreaterThan(0);
    expect(Object.keys(partial).length).toBeLessThan(Object.keys(everywhere).length);
    await model.setAdapterTensors("partial", partial);
    await model.setAdapterTensors("everywhere", everywhere);
    const batch = await prepared(lora.gradBatch);
    const [mine, full] = [await model.logprobs(batch, { adapter: "partial" }), await model.logprobs(batch, { adapter: "everywhere" })];
    expectAllClose("log-probs, partial vs full path", mine.logp, full.logp, [mine.logp.length], 1e-5);
    const grads: NamedTensors[] = [];
    for (const adapter of ["partial", "everywhere"]) {
      model.setTrainable(adapter);
      await model.backward(batch, { kind: "sft", scale: 1 });
      grads.push(await model.gradients(adapter));
    }
    // The two paths are the same function computed with other GEMM groupings, so float32 sums run in another order and
    // the backward through the GDN layers carries that rounding: 1.2e-5 relative on in_proj_a's lora_A on an AMD EPYC
    // host, under 1e-5 on others. 1e-4 is the tolerance of the PEFT gradient conformance above.
    for (const key of Object.keys(partial)) {
      expectRelClose(`gradient of ${key}`, grads[0]![key]!.data, grads[1]![key]!.data, grads[0]![key]!.shape, 1e-4);
    }
  });

  test("addAdapter: every regex target, A [r, in] within ±1/√in and not all zero, B [out, r] zero", async () => {
    const r = 8;
    model.addAdapter("fresh", { r, alpha: 16, targetModules: lora.targetModules, seed: 7 });
    const fresh = await model.adapterTensors("fresh");
    const peft = await readSafetensors(join(lora.adapterDir, "adapter_model.safetensors"));
    expect(Object.keys(fresh).sort(), "the modules PEFT matched with the same regex").toEqual(lora.keys);
    for (const [key, t] of entries(fresh)) {
      const peftShape = floatTensor(peft, key).shape;
      if (key.endsWith("lora_A.weight")) {
        const fanIn = peftShape[1]!;
        expect(t.shape, key).toEqual([r, fanIn]);
        const max = t.data.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
        expect(max, `${key}: kaiming_uniform(a=√5) bound 1/√${fanIn}`).toBeLessThanOrEqual(1 / Math.sqrt(fanIn));
        expect(max, `${key} is all zero`).toBeGreaterThan(0);
      } else {
        expect(t.shape, key).toEqual([peftShape[0], r]);
        expect(t.data.every((v) => v === 0), `${key} must start at zero`).toBe(true);
      }
    }
  });

  test("saveAdapter: PEFT loads it and reproduces the module's log-probs within 1e-4 abs", async () => {
    const adapter = "saved";
    model.addAdapter(adapter, { r: 4, alpha: 10, targetModules: lora.targetModules, seed: 11 });
    // B = 0 would make the adapter a no-op; give every tensor values of the size PEFT's goldens use.
    const values: NamedTensors = {};
    for (const [i, [key, t]] of entries(await model.adapterTensors(adapter)).entries()) {
      const bound = key.endsWith("lora_A.weight") ? 1 / Math.sqrt(t.shape[1]!) : 0.2;
      values[key] = { shape: t.shape, data: uniforms(1000 + i, t.data.length, -bound, bound) };
    }
    await model.setAdapterTensors(adapter, values);
    const dir = join(scratch, "saved-adapter");
    await model.saveAdapter(adapter, dir);

    const config = JSON.parse(await readFile(join(dir, "adapter_config.json"), "utf8")) as Record<string, unknown>;
    expect(config).toMatchObject({
      peft_type: "LORA", r: 4, lora_alpha: 10, lora_dropout: 0, target_modules: lora.targetModules, bias: "none",
      use_rslora: false, use_dora: false, modules_to_save: null, task_type: "CAUSAL_LM",
    });
    expect(typeof config.base_model_name_or_path, "base_model_name_or_path").toBe("string");
    const written = await readSafetensors(join(dir, "adapter_model.safetensors"));
    for (const [key, t] of Object.entries(values)) {
      expectAllClose(`saved tensor ${key}`, floatTensor(written, key).data, t.data, t.shape, 0);
    }

    // PEFT reads a content-addressed copy, so the reference is cached across runs (the scratch path is random).
    const weights = await readFile(join(dir, "adapter_model.safetensors"));
    const stable = join(FIXTURE_ROOT, "inputs", `adapter-${sha256(Buffer.concat([weights, Buffer.from(JSON.stringify(config))])).slice(0, 16)}`);
    await cp(dir, stable, { recursive: true });
    const reference = await pythonFixture({
      name: `peft-logprobs-${name}`, script: "peft_logprobs.py",
      args: ["--model", fx.modelDir(name), "--adapter", stable, "--batch", fx.batchJsonPath(name, "rows"), "--root", fx.root],
    });
    const loadedByPeft = JSON.parse(await readFile(join(reference, "adapter.json"), "utf8")) as { keys: string[] };
    expect(loadedByPeft.keys, "LoRA tensors PEFT created from the saved config").toEqual(lora.keys);
    const peftLogp = await readSafetensors(join(reference, "logp.safetensors"));
    const { logp, K } = await model.logprobs(await prepared("rows"), { adapter });
    for (let r = 0; r < logp.length / K; r++) {
      expectAllClose(`row ${r}: module vs PEFT log-probs with the module's saved adapter`,
        logp.subarray(r * K, (r + 1) * K), floatTensor(peftLogp, `logp.row.${r}`).data, [K], ATOL);
    }
  });

  test("Optimizer: two steps equal torch.optim.AdamW (weight decay 0.01) + clip_grad_norm_(1.0) within 1e-6 relative", async () => {
    const adapter = await peftAdapter("adamw");
    model.setTrainable(adapter);
    const batch = await prepared(lora.gradBatch);
    const hyper = { betas: [0.9, 0.999] as [number, number], eps: 1e-8, weightDecay: 0.01 };
    // Step 1 with a large loss scale (gradient norm > 1: clipped), step 2 with a small one (not clipped).
    const steps = [{ lr: 1e-2, maxGradNorm: 1.0, scale: 50 }, { lr: 5e-3, maxGradNorm: 1.0, scale: 0.01 }];
    const optimizer = new Optimizer(model, adapter, { lr: steps[0]!.lr, ...hyper });
    const inputs = new Map<string, { shape: number[]; data: Float32Array }>();
    for (const [key, t] of entries(await model.adapterTensors(adapter))) inputs.set(`p0.${key}`, t);
    const after: NamedTensors[] = [];
    const norms: number[] = [];
    for (const [i, step] of steps.entries()) {
      await model.backward(batch, { kind: "sft", scale: step.scale });
      for (const [key, t] of entries(await model.gradients(adapter))) inputs.set(`g${i + 1}.${key}`, t);
      norms.push((await optimizer.step({ lr: step.lr, maxGradNorm: step.maxGradNorm })).gradNorm);
      after.push(await model.adapterTensors(adapter));
    }
    expect(norms[0], "test set-up: step 1 must clip").toBeGreaterThan(1);
    expect(norms[1], "test set-up: step 2 must not clip").toBeLessThan(1);

    // Inputs live at a content-addressed path so the reference is cached across runs.
    const config = JSON.stringify({ steps: steps.map(({ lr, maxGradNorm }) => ({ lr, maxGradNorm })), ...hyper });
    const inputDir = join(FIXTURE_ROOT, "inputs");
    await mkdir(inputDir, { recursive: true });
    const tensorsFile = join(scratch, "adamw-inputs.safetensors");
    await writeSafetensors(tensorsFile, inputs);
    const hash = sha256(Buffer.concat([await readFile(tensorsFile), Buffer.from(config)]));
    const stableTensors = join(inputDir, `adamw-${hash.slice(0, 16)}.safetensors`);
    const stableConfig = join(inputDir, `adamw-${hash.slice(0, 16)}.json`);
    await writeFile(stableTensors, await readFile(tensorsFile));
    await writeFile(stableConfig, config);
    const reference = await pythonFixture({
      name: "adamw", script: "adamw_golden.py", args: ["--tensors", stableTensors, "--config", stableConfig],
    });
    const ref = await readSafetensors(join(reference, "adamw.safetensors"));
    const refNorms = (JSON.parse(await readFile(join(reference, "adamw.json"), "utf8")) as { gradNorms: number[] }).gradNorms;
    for (const [i, params] of after.entries()) {
      expectRelClose(`step ${i + 1} gradient norm (before clipping)`, [norms[i]!], [refNorms[i]!], [1], ADAMW_RTOL);
      for (const [key, t] of entries(params)) {
        expectRelClose(`step ${i + 1} parameter ${key}`, t.data, floatTensor(ref, `p${i + 1}.${key}`).data, t.shape, ADAMW_RTOL);
      }
    }
  });
});
