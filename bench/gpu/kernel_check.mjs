// One forward (log-probs) and one backward (SFT objective, LoRA gradients) of the native module on make_rows.py's
// rows, timed after a warm-up pass, writing the log-probs and every LoRA gradient to OUT_DIR. Run twice, with
// RLLOOP_KERNELS=0 (ATen everywhere) and 1 (the CUDA kernels: kernels/gdn.cu, kernels/rms_norm.cu, kernels/qkv_heads.cu), then compare_kernels.py.
// Usage: node bench/gpu/kernel_check.mjs MODEL_DIR ROWS_DIR ADAPTER_DIR OUT_DIR [--dtype bfloat16] [--rows 8] [--tf32 auto|on|off]
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { loadImageOptions } from "../../dist/train/images.js";
import { Model, deviceMemoryStats, preprocessImage, resetPeakMemoryStats } from "../../dist/native.js";

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: { dtype: { type: "string", default: "bfloat16" }, rows: { type: "string", default: "8" }, tf32: { type: "string", default: "auto" } },
});
const [modelDir, rowsDir, adapterDir, outDir] = positionals;
mkdirSync(outDir, { recursive: true });
const imageOptions = await loadImageOptions(modelDir); // the trainer's own reading of preprocessor_config.json
const rows = JSON.parse(readFileSync(join(rowsDir, "rows.json"), "utf8")).slice(0, Number(values.rows));
const inputs = await Promise.all(rows.map(async (r) => ({
  inputIds: Int32Array.from(r.inputIds),
  images: [await preprocessImage(new Uint8Array(readFileSync(r.image.replace(/\.png$/, ".rgb"))), r.width, r.height, imageOptions)],
  scoreStart: r.scoreStart,
  scoreCount: r.scoreCount,
})));

const model = await Model.load(modelDir, { device: "cuda:0", dtype: values.dtype, checkpointing: "off", visionCacheBytes: 0, tf32: values.tf32 });
await model.loadAdapter("policy", adapterDir);
model.setTrainable("policy");
const pass = async () => {
  const batch = await model.prepare(inputs);
  const before = deviceMemoryStats("cuda:0").allocatedBytes;
  resetPeakMemoryStats("cuda:0");
  const t0 = performance.now();
  const { logp } = await model.logprobs(batch, { adapter: "policy" });
  const t1 = performance.now();
  await model.backward(batch, { kind: "sft", scale: 1 });
  const t2 = performance.now();
  // what the forward + backward held above the model, adapter and batch: the saved activations and their peak
  const activationGiB = (deviceMemoryStats("cuda:0").peakAllocatedBytes - before) / 2 ** 30;
  return { logp, forwardMs: t1 - t0, backwardMs: t2 - t1, activationGiB };
};
await pass(); // warm-up (cuBLAS handles, allocator); its gradients are discarded below
const grads0 = await model.gradients("policy");
const { logp, forwardMs, backwardMs, activationGiB } = await pass();
const grads1 = await model.gradients("policy");
// gradients accumulate: the second pass's own gradient is the difference
const keys = Object.keys(grads1).sort();
const parts = keys.map((k) => Float32Array.from(grads1[k].data, (v, i) => v - grads0[k].data[i]));
writeFileSync(join(outDir, "logp.bin"), Buffer.from(logp.buffer, logp.byteOffset, logp.byteLength));
const total = parts.reduce((n, p) => n + p.length, 0);
const flat = new Float32Array(total);
let offset = 0;
for (const p of parts) { flat.set(p, offset); offset += p.length; }
writeFileSync(join(outDir, "grads.bin"), Buffer.from(flat.buffer));
writeFileSync(join(outDir, "meta.json"), JSON.stringify({ keys: keys.map((k, i) => [k, parts[i].length]), forwardMs, backwardMs, activationGiB }));
console.log(JSON.stringify({ dtype: values.dtype, kernels: process.env.RLLOOP_KERNELS ?? "1", rows: rows.length, backward: process.env.RLLOOP_GDN_BACKWARD ?? "manual", forwardMs, backwardMs, activationGiB }));
