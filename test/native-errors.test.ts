// Bad inputs to the native module: each must come back as a rejected promise (or a thrown JS Error for the
// synchronous calls) whose message names what failed (native-api.md: the key, the file, expected and actual),
// and the process must carry on: the last test loads a model and checks its log-probs after all the failures.
// The broken checkpoints are copies of the tiny fixtures with one thing changed.
import { cp, mkdtemp, readFile, rm, truncate, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Model, preprocessImage, type LoadOptions, type RowInput } from "../src/native.js";
import { expectAllClose } from "./helpers/compare.js";
import { conformanceFixtures, goldenRowInputs, imageOptions, nativePatches, type ConformanceFixtures, type ModelName } from "./helpers/conformance.js";
import { floatTensor, readHeader } from "./helpers/safetensors.js";

const ATOL = 1e-4;
const GATE_PROJ = "model.language_model.layers.0.mlp.gate_proj.weight"; // [128, 64] in model a
const FINAL_NORM = "model.language_model.norm.weight";

let fx: ConformanceFixtures;
let scratch: string;
let copies = 0;

async function copyModel(name: ModelName): Promise<string> {
  const dir = join(scratch, `${name}-${copies++}`);
  await cp(fx.modelDir(name), dir, { recursive: true });
  return dir;
}

/** Rewrites the JSON header of a safetensors file in place; the edit must keep its byte length. */
async function editHeader(file: string, edit: (json: string) => string): Promise<void> {
  const bytes = await readFile(file);
  const length = Number(bytes.readBigUInt64LE(0));
  const json = bytes.subarray(8, 8 + length).toString("utf8");
  const edited = edit(json);
  if (edited === json) throw new Error(`test set-up: the header edit of ${file} changed nothing`);
  if (Buffer.byteLength(edited) !== length) throw new Error(`test set-up: the header edit changed its length`);
  bytes.write(edited, 8, "utf8");
  await writeFile(file, bytes);
}

/** Replaces the JSON header of a safetensors file with an edited one (its length may change; the data stays). */
async function rewriteHeader(file: string, edit: (entries: Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>) => void): Promise<void> {
  const bytes = await readFile(file);
  const length = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + length).toString("utf8")) as Record<string, never>;
  edit(header);
  let json = JSON.stringify(header);
  json += " ".repeat((8 - (Buffer.byteLength(json) % 8)) % 8);
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  await writeFile(file, Buffer.concat([prefix, Buffer.from(json), bytes.subarray(8 + length)]));
}

async function editConfig(dir: string, edit: (config: { text_config: Record<string, unknown>; vision_config: Record<string, unknown> }) => void): Promise<void> {
  const path = join(dir, "config.json");
  const config = JSON.parse(await readFile(path, "utf8"));
  edit(config);
  await writeFile(path, JSON.stringify(config, null, 2));
}

/** The rejection's Error, asserted to be a JS Error whose message matches every fragment. */
async function expectRejection(promise: Promise<unknown>, fragments: (string | RegExp)[]): Promise<Error> {
  const err: unknown = await promise.then(() => null, (e: unknown) => e);
  expect(err, "the call must reject").toBeInstanceOf(Error);
  const message = (err as Error).message;
  for (const f of fragments) {
    if (typeof f === "string") expect(message, `error message should contain "${f}"`).toContain(f);
    else expect(message, `error message should match ${f}`).toMatch(f);
  }
  return err as Error;
}

beforeAll(async () => {
  fx = await conformanceFixtures();
  scratch = await mkdtemp(join(tmpdir(), "rlloop-native-errors-"));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe("native errors - Model.load rejects a broken checkpoint, naming what is wrong", () => {
  test("missing directory: names the path", async () => {
    const dir = join(scratch, "no-such-model");
    await expectRejection(Model.load(dir, { device: "cpu", dtype: "float32" }), [dir]);
  });

  // typed load options, checked on every device: a typo must not pick the default, on the CPU either
  test("an unknown attention backend is rejected naming the option and its choices", async () => {
    const opts = { device: "cpu", dtype: "float32", attention: "fastest" } as unknown as LoadOptions;
    await expectRejection(Model.load(fx.modelDir("a"), opts), ["opts.attention", '"flash" or "cudnn"', "fastest"]);
  });

  test("an unknown tf32 choice is rejected naming the option and its choices", async () => {
    const opts = { device: "cpu", dtype: "float32", tf32: "yes" } as unknown as LoadOptions;
    await expectRejection(Model.load(fx.modelDir("a"), opts), ["opts.tf32", '"auto" or "on" or "off"', "yes"]);
  });

  test("the choices load on the CPU, where neither setting applies (no process-wide claim: two models with different choices load side by side)", async () => {
    const models = await Promise.all([
      Model.load(fx.modelDir("a"), { device: "cpu", dtype: "float32", tf32: "on", attention: "cudnn" }),
      Model.load(fx.modelDir("a"), { device: "cpu", dtype: "float32", tf32: "off", attention: "flash" }),
    ]);
    expect(models.map((m) => m.info.numLayers)).toEqual([models[0]!.info.numLayers, models[0]!.info.numLayers]);
  });

  test("missing shard of a sharded checkpoint: names the shard file", async () => {
    const dir = await copyModel("b");
    const index = JSON.parse(await readFile(join(dir, "model.safetensors.index.json"), "utf8")) as { weight_map: Record<string, string> };
    const shard = index.weight_map["lm_head.weight"]!;
    await unlink(join(dir, shard));
    await expectRejection(Model.load(dir, { device: "cpu", dtype: "float32" }), [shard]);
  });

  test("corrupt safetensors header (not JSON): names the file", async () => {
    const dir = await copyModel("a");
    await editHeader(join(dir, "model.safetensors"), (json) => "#garbage#" + json.slice(9));
    await expectRejection(Model.load(dir, { device: "cpu", dtype: "float32" }), ["model.safetensors"]);
  });

  test("safetensors header length beyond the file: names the file", async () => {
    const dir = await copyModel("a");
    const file = join(dir, "model.safetensors");
    const bytes = await readFile(file);
    bytes.writeBigUInt64LE(BigInt(bytes.length) * 4n, 0);
    await writeFile(file, bytes);
    await expectRejection(Model.load(dir, { device: "cpu", dtype: "float32" }), ["model.safetensors"]);
  });

  test("truncated tensor data (cut inside a tensor the model needs): names the file", async () => {
    const dir = await copyModel("a");
    const file = join(dir, "model.safetensors");
    // The mtp.* tensors sit at the end of the file and may legitimately never be read; cut into the last one
    // before them so a loader that only checks what it reads must notice too.
    const header = await readHeader(file);
    const needed = Object.entries(header.entries).filter(([key]) => !key.startsWith("mtp."));
    const end = Math.max(...needed.map(([, e]) => e.data_offsets[1]));
    await truncate(file, 8 + header.length + end - 1024);
    await expectRejection(Model.load(dir, { device: "cpu", dtype: "float32" }), ["model.safetensors"]);
  });

  test("tensors that share bytes (one tensor's offsets pointing into another's): names both, the file refused", async () => {
    const dir = await copyModel("a");
    const file = join(dir, "model.safetensors");
    await rewriteHeader(file, (entries) => {
      const norm = entries[FINAL_NORM]!;
      const size = norm.data_offsets[1] - norm.data_offsets[0];
      // another entry of the same byte size, whose bytes the final norm would now read as its own
      const [other] = Object.entries(entries).find(([key, e]) => key !== FINAL_NORM && e.data_offsets !== undefined && e.data_offsets[1] - e.data_offsets[0] === size)!;
      norm.data_offsets = [...entries[other]!.data_offsets];
    });
    await expectRejection(Model.load(dir, { device: "cpu", dtype: "float32" }), ["model.safetensors", /overlap entry|bytes no tensor names/]);
  });

  test("bytes after the last tensor: the file refused as trailing data", async () => {
    const dir = await copyModel("a");
    const file = join(dir, "model.safetensors");
    await writeFile(file, Buffer.concat([await readFile(file), Buffer.alloc(16, 7)]));
    await expectRejection(Model.load(dir, { device: "cpu", dtype: "float32" }), ["model.safetensors", "16 trailing bytes after its last tensor"]);
  });

  test("tensor shape mismatch ([128,64] stored as [64,128]): names the key, the file, expected and actual", async () => {
    const dir = await copyModel("a");
    await editHeader(join(dir, "model.safetensors"), (json) =>
      json.replace(`"${GATE_PROJ}":{"dtype":"F32","shape":[128,64]`, `"${GATE_PROJ}":{"dtype":"F32","shape":[64,128]`));
    await expectRejection(Model.load(dir, { device: "cpu", dtype: "float32" }),
      [GATE_PROJ, "model.safetensors", /128\D{1,4}64/, /64\D{1,4}128/]);
  });

  test("missing tensor (final norm renamed): names the key", async () => {
    const dir = await copyModel("a");
    await editHeader(join(dir, "model.safetensors"), (json) =>
      json.replace(`"${FINAL_NORM}"`, `"${FINAL_NORM.replace("norm.weight", "norX.weight")}"`));
    await expectRejection(Model.load(dir, { device: "cpu", dtype: "float32" }), [FINAL_NORM]);
  });

  test.each([
    ["text_config.layer_types[1] = sliding_attention", (c: any) => { c.text_config.layer_types[1] = "sliding_attention"; }, ["sliding_attention"]],
    ["text_config.hidden_act = relu", (c: any) => { c.text_config.hidden_act = "relu"; }, ["hidden_act", "relu"]],
    ["text_config.attention_bias = true", (c: any) => { c.text_config.attention_bias = true; }, ["attention_bias"]],
    ["text_config.rope_parameters.rope_type = yarn", (c: any) => { c.text_config.rope_parameters.rope_type = "yarn"; }, ["rope_type", "yarn"]],
    ["vision_config.hidden_act = quick_gelu", (c: any) => { c.vision_config.hidden_act = "quick_gelu"; }, ["hidden_act", "quick_gelu"]],
  ])("unsupported config field %s: names the field", async (_, edit, fragments) => {
    const dir = await copyModel("a");
    await editConfig(dir, edit);
    await expectRejection(Model.load(dir, { device: "cpu", dtype: "float32" }), fragments);
  });
});

describe("native errors - bad rows, images and adapters on a loaded model", () => {
  let model: Model;
  let rows: RowInput[];

  beforeAll(async () => {
    model = await Model.load(fx.modelDir("a"), { device: "cpu", dtype: "float32" });
    rows = await goldenRowInputs(fx, "a", await fx.batch("a", "rows"));
  });

  test("prepare: an image whose grid does not match the row's image tokens (8 features for 6 pads)", async () => {
    const row = rows[0]!; // img2: grid (1, 4, 6) → 6 image tokens
    const wrong: RowInput = { ...row, images: [rows[1]!.images[0]!] }; // img3: grid (1, 4, 8) → 8 features
    await expectRejection(model.prepare([wrong]), [/image/i, /\b6\b/, /\b8\b/]);
  });

  test("prepare: a row with an image block but no image", async () => {
    await expectRejection(model.prepare([{ ...rows[0]!, images: [] }]), [/image/i]);
  });

  test("preprocessImage: an RGB buffer shorter than width*height*3 throws naming the expected size", () => {
    const options = { patchSize: 16, temporalPatchSize: 2, mergeSize: 2, minPixels: 4096, maxPixels: 16777216,
      mean: [0.5, 0.5, 0.5] as [number, number, number], std: [0.5, 0.5, 0.5] as [number, number, number] };
    expect(() => preprocessImage(new Uint8Array(299), 10, 10, options)).toThrow(/300/);
  });

  test("loadAdapter: an adapter of another model (hidden 96 vs 64) is rejected naming a key, and not registered", async () => {
    const other = join(fx.root, "lora", "b", "adapter");
    await expectRejection(model.loadAdapter("other", other),
      [/base_model\.model\.model\.language_model\.layers\.\d+\.[a-z_]+\.[a-z_]+\.lora_[AB]\.weight/]);
    expect(model.adapterNames()).not.toContain("other");
  });

  test("loadAdapter: a folder without adapter_config.json names the missing file", async () => {
    const dir = join(scratch, "empty-adapter");
    await cp(join(fx.root, "images"), dir, { recursive: true });
    await expectRejection(model.loadAdapter("empty", dir), ["adapter_config.json"]);
  });

  test("logprobs: an unknown adapter name is rejected naming it", async () => {
    const batch = await model.prepare(rows);
    await expectRejection(model.logprobs(batch, { adapter: "no-such-adapter" }), ["no-such-adapter"]);
  });

  test("after every failure above the process and module still work: log-probs within 1e-4 of transformers", async () => {
    const fresh = await Model.load(fx.modelDir("a"), { device: "cpu", dtype: "float32" });
    const golden = await fx.batch("a", "rows");
    const patches = await nativePatches(fx.root, golden.rows, await imageOptions(fx.modelDir("a")));
    expect(patches.size).toBe(3);
    for (const m of [model, fresh]) {
      const { logp, K } = await m.logprobs(await m.prepare(rows), { adapter: null });
      golden.rows.forEach((_, r) => {
        expectAllClose(`row ${r} log-probs`, logp.subarray(r * K, (r + 1) * K), floatTensor(golden.tensors, `row.${r}.logp`).data, [K], ATOL);
      });
    }
  });
});
