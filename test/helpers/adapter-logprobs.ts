// An adapter the trainer wrote, scored two ways on the rows of a round folder: by PEFT on the transformers model
// (scripts/reference/peft_logprobs.py, fp32 eager, the way a PEFT/vLLM consumer loads it) and by the native module
// (Model.loadAdapter, fp32 CPU). Rows are collated by the trainer's own collator (chat template, prompt template,
// tokenizer, image patches), so both score exactly the tokens the adapter was trained on; PEFT recomputes the pixel
// values from the same PNGs with transformers' processor.
// PEFT's inputs (adapter files, frames, batch JSON) are copied to a content-addressed folder, so the reference is
// cached across runs whenever the trainer writes the same adapter.
import { createHash } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import type { Model, RowInput } from "../../src/native.js";
import { ModelAssets } from "../../src/train/model-assets.js";
import { loadCollator } from "../../src/train/collate.js";
import { loadPrompt } from "../../src/train/prompt.js";
import { readRows } from "../../src/train/rows.js";
import { ADAPTER_FILES } from "../../src/loop/trainer.js";
import { FIXTURE_ROOT, pythonFixture, sha256 } from "./fixture-cache.js";
import { floatTensor, readSafetensors } from "./safetensors.js";

/** A round's train.jsonl as native inputs, and the same rows in peft_logprobs.py's batch format. */
export interface ScoredRows {
  inputs: RowInput[];
  /** absolute paths of the row's PNGs, by image name (the file name) */
  frames: Map<string, string>;
  batch: { rows: Array<{ inputIds: number[]; images: Array<{ name: string; png: string; grid: number[] }>; scoreStart: number; scoreCount: number }> };
}

/** The rows of `<roundDir>/train.jsonl` (frame paths relative to the folder), collated as the trainer does. */
export async function roundRows(modelDir: string, promptFile: string, roundDir: string): Promise<ScoredRows> {
  const collator = await loadCollator(new ModelAssets(modelDir), await loadPrompt(promptFile));
  const rows = await readRows(join(roundDir, "train.jsonl"), "ppo", "--data", roundDir);
  const inputs: RowInput[] = [];
  const frames = new Map<string, string>();
  const batch: ScoredRows["batch"] = { rows: [] };
  for (const row of rows) {
    const input = await collator.row(row, "train.jsonl");
    const name = basename(row.image);
    frames.set(name, row.image);
    inputs.push(input);
    batch.rows.push({
      inputIds: Array.from(input.inputIds),
      images: [{ name, png: `frames/${name}`, grid: [...input.images[0]!.grid] }],
      scoreStart: input.scoreStart,
      scoreCount: input.scoreCount,
    });
  }
  return { inputs, frames, batch };
}

/** PEFT's log-probs per row ([K] each) with the adapter in `adapterDir`, and the LoRA keys PEFT loaded into the model. */
export async function peftLogprobs(modelDir: string, adapterDir: string, rows: ScoredRows): Promise<{ rows: Float32Array[]; keys: string[] }> {
  const inputs = await contentAddressedInputs(adapterDir, rows);
  const reference = await pythonFixture({
    name: "peft-logprobs-loop", script: "peft_logprobs.py",
    args: ["--model", modelDir, "--adapter", join(inputs, "adapter"), "--batch", join(inputs, "batch.json"), "--root", inputs],
  });
  const logp = await readSafetensors(join(reference, "logp.safetensors"));
  const { keys } = JSON.parse(await readFile(join(reference, "adapter.json"), "utf8")) as { keys: string[] };
  return { rows: rows.batch.rows.map((_, r) => floatTensor(logp, `logp.row.${r}`).data), keys };
}

/** The native module's log-probs per row ([K] each) with the adapter in `adapterDir` (none: the base model). */
export async function nativeLogprobs(model: Model, rows: ScoredRows, adapterDir: string | null): Promise<Float32Array[]> {
  const name = adapterDir === null ? null : "scored";
  if (name !== null) await model.loadAdapter(name, adapterDir!);
  try {
    const { logp, K } = await model.logprobs(await model.prepare(rows.inputs), { adapter: name });
    return rows.inputs.map((_, r) => logp.slice(r * K, (r + 1) * K));
  } finally {
    if (name !== null) model.removeAdapter(name);
  }
}

/** max |a − b| over the rows' scored tokens. */
export function maxAbsDifference(a: Float32Array[], b: Float32Array[]): number {
  return a.reduce((m, row, r) => row.reduce((n, v, k) => Math.max(n, Math.abs(v - b[r]![k]!)), m), 0);
}

/** adapter/, frames/ and batch.json under FIXTURE_ROOT/inputs, named by the hash of their bytes. */
async function contentAddressedInputs(adapterDir: string, rows: ScoredRows): Promise<string> {
  const files = new Map<string, Buffer>();
  for (const name of ADAPTER_FILES) files.set(join("adapter", name), await readFile(join(adapterDir, name)));
  for (const [name, path] of rows.frames) files.set(join("frames", name), await readFile(path));
  files.set("batch.json", Buffer.from(JSON.stringify(rows.batch)));
  const hash = createHash("sha256");
  for (const [path, bytes] of [...files].sort(([a], [b]) => a.localeCompare(b))) hash.update(path).update(sha256(bytes));
  const dir = join(FIXTURE_ROOT, "inputs", `loop-adapter-${hash.digest("hex").slice(0, 16)}`);
  await mkdir(join(dir, "adapter"), { recursive: true });
  await mkdir(join(dir, "frames"), { recursive: true });
  for (const [path, bytes] of files) await writeFile(join(dir, path), bytes);
  return dir;
}

