// The hand-derived backward of the chunked delta rule (native/src/delta_rule_chunks.cpp, the default) against
// autograd replaying the ATen formulation op by op (RLLOOP_GDN_BACKWARD=autograd): the same
// LoRA gradients and log-probs on both tiny configs, rows long enough for several chunks and right-padded.
// Each variant runs in its own process: the switch is read from the real environment, once.
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

async function run(model: string, manual: boolean): Promise<Run> {
  const out = join(await mkdtemp(join(tmpdir(), "rlloop-delta-")), "run.json");
  await execa(process.execPath, ["--import", "tsx", "--input-type=module", "-e", SCRIPT, model, out], {
    env: { RLLOOP_GDN_BACKWARD: manual ? "manual" : "autograd" },
  });
  return JSON.parse(await readFile(out, "utf8")) as Run;
}

const norm = (x: number[]) => Math.sqrt(x.reduce((s, v) => s + v * v, 0));

describe("native - hand-derived delta-rule backward", () => {
  it.each(["a", "b"])("config %s: gradients and log-probs equal autograd's", async (config) => {
    const model = await pythonFixture({ name: `tiny-${config}`, script: "tiny_model.py", args: ["--config", config, "--seed", "0"] });
    const [auto, manual] = await Promise.all([run(model, false), run(model, true)]);
    expect(manual.logp).toEqual(auto.logp); // the forward is the same arithmetic
    let worst = 0;
    for (const [name, want] of Object.entries(auto.grads)) {
      const got = manual.grads[name]!;
      expect(norm(want), name).toBeGreaterThan(0);
      const rel = norm(got.map((v, i) => v - want[i]!)) / norm(want);
      expect(rel, name).toBeLessThanOrEqual(TOLERANCE);
      worst = Math.max(worst, rel);
    }
    figure(`delta rule, config ${config}: hand-derived backward vs autograd, worst LoRA tensor (relative L2)`, worst, TOLERANCE);
  });
});
