// The delta rule's fused kernels against its ATen formulation on the GPU, without the model: both against a
// float64 run of the ATen formulation (relative L2 of the output and of every input's gradient), exact float32
// products and TF32, at a few small shapes and at the 9B training shape (B·H = 16 x 32 sequences of 420 tokens,
// heads of 128), then both timed there (medians); and at every shape, whether a NaN planted in an input reached the
// kernels' results (nanLost: the ones that did not). Usage (after device-build.sh, from the repository root):
//   node bench/gpu/delta_rule_check.mjs [--small|--profile]
// --small: one small shape only (for compute-sanitizer); --profile: the training shape once, TF32 (for ncu).
import { deltaRuleCheck } from "../../dist/native.js";

const small = process.argv.includes("--small");
const profile = process.argv.includes("--profile");
const cases = small
  ? [{ sequences: 2, length: 130, dim: 128, tf32: true }]
  : profile
  ? [{ sequences: 512, length: 420, dim: 128, tf32: true }]
  : [
      ...[64, 130, 448, 500].flatMap((length) => [false, true].map((tf32) => ({ sequences: 8, length, dim: 128, tf32 }))),
      { sequences: 512, length: 420, dim: 128, tf32: false },
      { sequences: 512, length: 420, dim: 128, tf32: true, repeats: 10 },
      { sequences: 1024, length: 420, dim: 128, tf32: true, repeats: 5 },  // the frozen pass's batch of 32 rows
    ];
const worst = (e) => Math.max(e.output, ...Object.values(e.grads));
const rows = [];
for (const c of cases) {
  const started = Date.now();
  const r = deltaRuleCheck({ device: "cuda:0", seed: 1, ...c });
  console.log(JSON.stringify({ case: c, ...r, seconds: (Date.now() - started) / 1000 }));
  rows.push({ ...c, kernels: worst(r.kernels), chunks: worst(r.chunks), kt: r.kernelsTime, ct: r.chunksTime, nanLost: r.nanLost.length });
}
console.log("\nsequences length tf32 | worst rel. error vs float64: kernels chunks | ms forward: kernels chunks | ms forward+backward: kernels chunks | NaNs lost");
for (const r of rows) {
  const ms = (t) => (t.forwardMs ? `${t.forwardMs.toFixed(2)}` : "-");
  const tr = (t) => (t.trainingMs ? `${t.trainingMs.toFixed(2)}` : "-");
  console.log(
    `${r.sequences} ${r.length} ${r.tf32 ? "tf32" : "fp32"} | ${r.kernels.toExponential(2)} ${r.chunks.toExponential(2)} | ` +
      `${ms(r.kt)} ${ms(r.ct)} | ${tr(r.kt)} ${tr(r.ct)} | ${r.nanLost}`,
  );
}
