// rlloop's log-probs of the scored tokens for the rows of make_rows.py, through the native module (the compiled
// dist/native.js): frames read as the raw RGB make_rows.py writes beside each PNG, preprocessed natively, rows prepared in batches (right-padded).
// Plain JavaScript because the GPU machine carries Node but no TypeScript toolchain (see bench/README.md).
// Usage: node bench/gpu/native_logprobs.mjs MODEL_DIR ROWS_DIR OUT.json [--dtype bfloat16] [--batch 8] [--limit N]
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { deviceMemoryStats, Model, preprocessImage, resetPeakMemoryStats } from "../../dist/native.js";
import { loadImageOptions } from "../../dist/train/images.js";

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: { dtype: { type: "string", default: "bfloat16" }, batch: { type: "string", default: "8" }, limit: { type: "string", default: "0" },
             device: { type: "string", default: "cuda:0" } },
});
const [modelDir, rowsDir, outPath] = positionals;
const imageOptions = await loadImageOptions(modelDir); // the trainer's own reading of preprocessor_config.json
let rows = JSON.parse(readFileSync(join(rowsDir, "rows.json"), "utf8"));
if (Number(values.limit) > 0) rows = rows.slice(0, Number(values.limit));

const model = await Model.load(modelDir, { device: values.device, dtype: values.dtype, checkpointing: "off" });
resetPeakMemoryStats(values.device);
const start = performance.now();
const logp = [];
const batch = Number(values.batch);
for (let i = 0; i < rows.length; i += batch) {
  const inputs = await Promise.all(rows.slice(i, i + batch).map(async (r) => {
    const data = new Uint8Array(readFileSync(r.image.replace(/\.png$/, ".rgb")));
    const { width, height } = r;
    return { inputIds: Int32Array.from(r.inputIds), images: [await preprocessImage(data, width, height, imageOptions)],
             scoreStart: r.scoreStart, scoreCount: r.scoreCount };
  }));
  const prepared = await model.prepare(inputs);
  const out = await model.logprobs(prepared, { adapter: null });
  for (let b = 0; b < inputs.length; b++) logp.push(Array.from(out.logp.subarray(b * out.K, (b + 1) * out.K)));
}
const seconds = (performance.now() - start) / 1000;
const memory = deviceMemoryStats(values.device);
writeFileSync(outPath, JSON.stringify({ dtype: values.dtype, logp, seconds, peak_gib: memory.peakAllocatedBytes / 2 ** 30 }));
console.log(JSON.stringify({ rows: logp.length, seconds, peak_gib: memory.peakAllocatedBytes / 2 ** 30 }));
