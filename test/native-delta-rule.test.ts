// The delta rule's implementations agree through the whole model (an SFT backward's log-probs and LoRA gradients,
// rows long enough for several chunks and right-padded): the hand-derived backward of the ATen formulation
// (native/src/delta_rule/aten.cpp, the default) against autograd replaying it op by op
// (RLLOOP_GDN_BACKWARD=autograd), on both tiny configs; and the fused kernels (delta_rule/programs.h, run by the CPU
// executor: RLLOOP_DELTA_RULE_CPU=kernels) against the ATen formulation, on the config whose key and value heads
// are one size. Each variant runs in its own process: the switches are read from the real environment, once.
import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import { pythonFixture } from "./helpers/fixture-cache.js";
import { REPO } from "./helpers/loop.js";
import { figure } from "./helpers/train-run.js";

const TOLERANCE = 1e-4; // relative L2 per LoRA tensor, as the PEFT comparisons
const TARGETS =
  "model.language_model.*\\\\.(q_proj|k_proj|v_proj|o_proj|in_proj_qkv|in_proj_z|in_proj_b|in_proj_a|out_proj|gate_proj|up_proj|down_proj)$";

// A LoRA adapter with non-zero B (so both A and B get gradients), an SFT backward on rows of 150, 97 and 64
// tokens (3, 2 and 1 chunks of 64, two of them padded), then the log-probs and gradients as JSON.
const SCRIPT = `
const { writeFileSync } = await import("node:fs");
const { Model } = await import(${JSON.stringify(join(REPO, "src", "native.ts"))});
const [dir, out] = process.argv.slice(1);
const model = await Model.load(dir);
model.addAdapter("p", { r: 4, alpha: 8, targetModules: "${TARGETS}", seed: 3 });
const tensors = await model.adapterTensors("p");
for (const [name, t] of Object.entries(tensors)) if (name.includes("lora_B")) t.data = t.data.map((_, i) => Math.sin(i + name.length) * 0.05);
await model.setAdapterTensors("p", tensors);
model.setTrainable("p");
let s = 7;
const next = () => (s = (s * 1103515245 + 12345) % 2147483648) / 2147483648;
const rows = [150, 97, 64].map((n) => ({ inputIds: Int32Array.from({ length: n }, () => Math.floor(next() * 990)), images: [], scoreStart: n - 4, scoreCount: 4 }));
const batch = await model.prepare(rows);
const { logp } = await model.backward(batch, { kind: "sft", scale: 1 });
const grads = await model.gradients("p");
writeFileSync(out, JSON.stringify({ logp: Array.from(logp), grads: Object.fromEntries(Object.entries(grads).map(([k, t]) => [k, Array.from(t.data)])) }));
`;

interface Run {
  logp: number[];
  grads: Record<string, number[]>;
}

async function run(model: string, env: Record<string, string>): Promise<Run> {
  const out = join(await mkdtemp(join(tmpdir(), "rlloop-delta-")), "run.json");
  await execa(process.execPath, ["--import", "tsx", "--input-type=module", "-e", SCRIPT, model, out], { env });
  return JSON.parse(await readFile(out, "utf8")) as Run;
}

const norm = (x: number[]) => Math.sqrt(x.reduce((s, v) => s + v * v, 0));

/** The worst relative L2 over the LoRA tensors of `got` against `want`, each checked against the tolerance. */
function worstGradient(got: Run, want: Run): number {
  let worst = 0;
  for (const [name, expected] of Object.entries(want.grads)) {
    const actual = got.grads[name]!;
    expect(norm(expected), name).toBeGreaterThan(0);
    const rel = norm(actual.map((v, i) => v - expected[i]!)) / norm(expected);
    expect(rel, name).toBeLessThanOrEqual(TOLERANCE);
    worst = Math.max(worst, rel);
  }
  return worst;
}

const tinyModel = (config: string) =>
  pythonFixture({ name: `tiny-${config}`, script: "tiny_model.py", args: ["--config", config, "--seed", "0"] });

describe("native - hand-derived delta-rule backward", () => {
  it.each(["a", "b"])("config %s: gradients and log-probs equal autograd's", async (config) => {
    const model = await tinyModel(config);
    const [auto, manual] = await Promise.all([run(model, { RLLOOP_GDN_BACKWARD: "autograd" }), run(model, { RLLOOP_GDN_BACKWARD: "manual" })]);
    expect(manual.logp).toEqual(auto.logp); // the forward is the same arithmetic
    figure(`delta rule, config ${config}: hand-derived backward vs autograd, worst LoRA tensor (relative L2)`, worstGradient(manual, auto), TOLERANCE);
  });
});

describe("native - fused delta-rule kernels in the model", () => {
  it("config a: log-probs and gradients match the ATen formulation's", async () => {
    const model = await tinyModel("a"); // dk = dv = 16 (config b's 24 / 16 keeps the ATen formulation)
    const [chunks, kernels] = await Promise.all([run(model, {}), run(model, { RLLOOP_DELTA_RULE_CPU: "kernels" })]);
    const logpError = Math.max(...kernels.logp.map((v, i) => Math.abs(v - chunks.logp[i]!)));
    expect(logpError).toBeLessThanOrEqual(1e-4);
    figure("delta rule, config a: fused kernels vs the ATen formulation, max log-prob difference", logpError, 1e-4);
    figure("delta rule, config a: fused kernels vs the ATen formulation, worst LoRA tensor (relative L2)", worstGradient(kernels, chunks), TOLERANCE);
  });

  it("an unknown RLLOOP_DELTA_RULE_CPU is rejected naming the variable and its choices", async () => {
    const model = await tinyModel("a");
    await expect(run(model, { RLLOOP_DELTA_RULE_CPU: "fused" })).rejects.toThrow(/RLLOOP_DELTA_RULE_CPU: "fused" is not chunks \(the default\) or kernels/);
  });
});
