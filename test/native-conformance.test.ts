// The native Qwen3.5 forward against transformers 5.17 (fp32, eager attention, TF32 off) on two tiny random
// checkpoints (scripts/reference/tiny_model.py): "a" is qwen35.md §16 (8 layers LLLFLLLF, float32, one file with
// mtp.* tensors), "b" has other head counts and sizes, layers FLFL, GDN r = 3 with key dim != value dim, and is
// stored as sharded bfloat16 (the golden is computed from the same bf16 values upcast). Images go PNG → sharp →
// native preprocessImage, so pixel values are compared with transformers' processor and everything downstream
// depends on them. Goldens are one unpadded row at a time; the "rows" batch is right-padded by the module, so
// every comparison on it also checks that padding changes nothing.
import { beforeAll, describe, expect, test } from "vitest";
import { Model, type Batch, type RowInput } from "../src/native.js";
import { batchItem, absDiff, expectAllClose } from "./helpers/compare.js";
import {
  BATCH_NAMES, MODEL_NAMES, conformanceFixtures, goldenRowInputs, imageOptions, nativePatches,
  type BatchGolden, type BatchName, type ConformanceFixtures,
} from "./helpers/conformance.js";
import { floatTensor, intTensor } from "./helpers/safetensors.js";

const ATOL = 1e-4; // fp32 forward vs transformers (qwen35.md §17: an independent fp32 implementation reached 7.5e-5)
const PIXEL_ATOL = 1e-6; // "bit-compatible" preprocessing; one 8-bit level is 7.8e-3
const PADDING_ATOL = 1e-5; // the module's padded batch vs the same row alone: only rounding may differ
const MARGIN = 1e-3; // argmax flags are compared where transformers' top-2 logits differ by more than this

type Inspection = Awaited<ReturnType<Model["inspect"]>>;

function memo<K, V>(make: (key: K) => Promise<V>): (key: K) => Promise<V> {
  const cache = new Map<K, Promise<V>>();
  return (key) => {
    if (!cache.has(key)) cache.set(key, make(key));
    return cache.get(key)!;
  };
}

describe.each(MODEL_NAMES)("native conformance - tiny model %s vs transformers (fp32)", (name) => {
  let fx: ConformanceFixtures;
  let model: Model;
  const golden = memo((b: BatchName): Promise<BatchGolden> => fx.batch(name, b));
  const inputs = memo(async (b: BatchName): Promise<RowInput[]> => goldenRowInputs(fx, name, await golden(b)));
  const prepared = memo(async (b: BatchName): Promise<Batch> => model.prepare(await inputs(b)));
  const inspected = memo(async (b: BatchName): Promise<Inspection> => model.inspect(await prepared(b), { adapter: null }));

  beforeAll(async () => {
    fx = await conformanceFixtures();
    model = await Model.load(fx.modelDir(name), { device: "cpu", dtype: "float32", checkpointing: "off" });
  });

  test("model.info reports config.json: sizes, layer kinds, vision token ids, patch and merge sizes", async () => {
    const m = fx.manifest.models[name];
    expect(model.info).toMatchObject({
      hiddenSize: m.hiddenSize, numLayers: m.numLayers, vocabSize: m.vocabSize, layerTypes: m.layerTypes,
      imageTokenId: m.image_token_id, videoTokenId: m.video_token_id, visionStartTokenId: m.vision_start_token_id,
      visionEndTokenId: m.vision_end_token_id, vision: { patchSize: 16, temporalPatchSize: 2, mergeSize: 2 },
      device: "cpu", dtype: "float32",
    });
    // Every module PEFT wraps with the seed's regex must be LoRA-capable in the module.
    const peftModules = new Set((await fx.lora(name)).keys.map((k) => k.replace(/^base_model\.model\./, "").replace(/\.lora_[AB]\.weight$/, "")));
    expect([...peftModules].filter((p) => !model.info.loraModules.includes(p)), "PEFT targets missing from info.loraModules").toEqual([]);
  });

  test.each(BATCH_NAMES)("%s: image grids equal transformers' processor, pixel values within 1e-6 abs", async (b) => {
    const g = await golden(b);
    const patches = await nativePatches(fx.root, g.rows, await imageOptions(fx.modelDir(name)));
    for (const image of g.rows.flatMap((r) => r.images)) {
      const p = patches.get(image.name)!;
      expect([...p.grid], `grid of ${image.png}`).toEqual(image.grid);
      const ref = floatTensor(g.tensors, `image.${image.name}.pixel_values`);
      expectAllClose(`pixel values of ${image.png}`, p.pixelValues, ref.data, ref.shape, PIXEL_ATOL);
    }
  });

  test.each(BATCH_NAMES)("%s: vision features of every image within 1e-4 abs", async (b) => {
    const g = await golden(b);
    const { visionFeatures } = await inspected(b);
    const images = g.rows.flatMap((r) => r.images);
    expect(visionFeatures.length, "one feature block per image, in row order").toBe(images.length);
    images.forEach((image, i) => {
      const ref = floatTensor(g.tensors, `image.${image.name}.features`);
      expectAllClose(`vision features of ${image.name} (image ${i}, grid ${image.grid})`, visionFeatures[i]!, ref.data, ref.shape, ATOL);
    });
  });

  test.each(BATCH_NAMES)("%s: M-RoPE position ids equal get_rope_index", async (b) => {
    const g = await golden(b);
    const { positionIds } = await inspected(b);
    const B = g.rows.length;
    const L = positionIds.length / (3 * B);
    g.rows.forEach((row, r) => {
      const ref = intTensor(g.tensors, `row.${r}.position_ids`);
      const n = row.inputIds.length;
      for (let c = 0; c < 3; c++) {
        const actual = positionIds.subarray((c * B + r) * L, (c * B + r) * L + n);
        const expected = ref.data.subarray(c * n, (c + 1) * n);
        const d = absDiff(actual, expected, [n]);
        expect(d.maxAbs, `row ${r} position component ${"THW"[c]}: first difference at token ${d.at} ` +
          `(actual ${d.actual}, expected ${d.expected}); rope delta ${row.ropeDelta}`).toBe(0);
      }
    });
  });

  test.each(BATCH_NAMES)("%s: hidden state of every layer within 1e-4 abs (embeddings, each layer, final norm)", async (b) => {
    const g = await golden(b);
    const { hiddenStates } = await inspected(b);
    const H = fx.manifest.models[name].hiddenSize;
    const B = g.rows.length;
    expect(hiddenStates.length, "numLayers + 1 hidden states").toBe(g.numLayers + 1);
    // All layers first, then one assertion: the table shows where the module starts to diverge.
    const lines: string[] = [];
    let worst = 0;
    hiddenStates.forEach((h, layer) => {
      const L = h.length / (B * H);
      g.rows.forEach((row, r) => {
        const n = row.inputIds.length;
        const ref = floatTensor(g.tensors, `row.${r}.hidden.${layer}`);
        const d = absDiff(batchItem(h, r, L, H, n), ref.data, [n, H], ATOL);
        worst = Math.max(worst, d.maxAbs);
        const kind = layer === 0 ? "embeddings" : layer === g.numLayers ? "final norm" :
          `after layer ${layer - 1} (${fx.manifest.models[name].layerTypes[layer - 1]})`;
        lines.push(`  hidden[${layer}] ${kind}, row ${r}: max ${d.maxAbs.toExponential(2)} at [token, channel] ` +
          `[${d.at}] (actual ${d.actual}, expected ${d.expected}), ${d.over}/${d.count} over; |ref| ≤ ${d.refMaxAbs.toFixed(2)}` +
          (d.maxAbs > ATOL ? "   <-- over" : ""));
      });
    });
    expect(worst, `hidden states vs transformers' output_hidden_states (tolerance ${ATOL}):\n${lines.join("\n")}`)
      .toBeLessThanOrEqual(ATOL);
  });

  test.each(BATCH_NAMES)("%s: logits at the scored positions within 1e-4 abs", async (b) => {
    const g = await golden(b);
    const { logits } = await inspected(b);
    const V = fx.manifest.models[name].vocabSize;
    g.rows.forEach((row, r) => {
      const K = row.scoreCount;
      const ref = floatTensor(g.tensors, `row.${r}.logits`);
      expectAllClose(`logits of row ${r} [scored j, vocab] (positions ${row.scoreStart - 1}…)`,
        logits.subarray(r * K * V, (r + 1) * K * V), ref.data, [K, V], ATOL);
    });
  });

  test.each(BATCH_NAMES)("%s: log-probs of the scored tokens within 1e-4 abs; argmax flags equal transformers'", async (b) => {
    const g = await golden(b);
    const { logp, correct, K } = await model.logprobs(await prepared(b), { adapter: null });
    expect(K).toBe(g.rows[0]!.scoreCount);
    g.rows.forEach((row, r) => {
      const ref = floatTensor(g.tensors, `row.${r}.logp`);
      expectAllClose(`log-probs of row ${r} (targets ${row.targets})`, logp.subarray(r * K, (r + 1) * K), ref.data, [K], ATOL);
      row.correct.forEach((flag, j) => {
        if (row.margin[j]! <= MARGIN) return;
        expect(correct[r * K + j] === 1, `row ${r} scored token ${j}: argmax == target is ${flag} in transformers ` +
          `(top-2 margin ${row.margin[j]!.toFixed(4)})`).toBe(flag);
      });
    });
  });

  test("rows: the padded batch's log-probs and logits equal each row prepared alone within 1e-5 abs", async () => {
    const rows = await inputs("rows");
    const batched = await model.logprobs(await prepared("rows"), { adapter: null });
    const batchedLogits = (await inspected("rows")).logits;
    const V = fx.manifest.models[name].vocabSize;
    for (const [r, row] of rows.entries()) {
      const alone = await model.prepare([row]);
      const single = await model.logprobs(alone, { adapter: null });
      const K = single.K;
      expectAllClose(`row ${r} log-probs: padded batch vs alone`, batched.logp.subarray(r * K, (r + 1) * K), single.logp, [K], PADDING_ATOL);
      const singleLogits = (await model.inspect(alone, { adapter: null })).logits;
      expectAllClose(`row ${r} logits: padded batch vs alone`, batchedLogits.subarray(r * K * V, (r + 1) * K * V), singleLogits, [K, V], PADDING_ATOL);
    }
  });
});
