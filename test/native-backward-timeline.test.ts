// RLLOOP_BACKWARD_TIMELINE (native/src/diagnostics/backward_timeline.h): the backward's time by model segment, from gradient
// hooks on the residual stream and the custom backward nodes' own timers — the backward profile Kineto cannot give
// on CUDA. On the CPU the stamps are clock readings; the structure and the arithmetic are what is checked here (the
// GPU figures are bench/gpu's business). Each run is its own process: the variable is read once.
import { mkdtemp, readFile, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import { pythonFixture } from "./helpers/fixture-cache.js";
import { REPO } from "./helpers/loop.js";

// Two SFT backward calls of a LoRA adapter on the tiny model (rows of 150 and 97 tokens: several delta-rule chunks).
const SCRIPT = `
const { Model } = await import(${JSON.stringify(join(REPO, "src", "native.ts"))});
const [dir] = process.argv.slice(1);
const model = await Model.load(dir);
model.addAdapter("p", { r: 4, alpha: 8, targetModules: "model.language_model.*\\\\.(q_proj|in_proj_qkv|out_proj|down_proj)$", seed: 3 });
model.setTrainable("p");
const rows = [150, 97].map((n) => ({ inputIds: Int32Array.from({ length: n }, (_, i) => (i * 37) % 900), images: [], scoreStart: n - 4, scoreCount: 4 }));
for (let i = 0; i < 2; i++) await model.backward(await model.prepare(rows), { kind: "sft", scale: 1 });
`;

interface Line {
  device: string;
  total_ms: number;
  segments: Record<string, number>;
  nodes: Record<string, number>;
}

async function run(model: string, timeline: string | undefined): Promise<void> {
  await execa(process.execPath, ["--import", "tsx", "--input-type=module", "-e", SCRIPT, model], {
    env: timeline ? { RLLOOP_BACKWARD_TIMELINE: timeline } : {},
  });
}

describe("native - backward timeline", () => {
  it("writes one line per backward: head, each layer kind and the MLPs partition the backward; nodes nest inside", async () => {
    const model = await pythonFixture({ name: "tiny-a", script: "tiny_model.py", args: ["--config", "a", "--seed", "0"] });
    const config = JSON.parse(await readFile(join(model, "config.json"), "utf8")) as { text_config: { layer_types: string[] } };
    const kinds = new Set(config.text_config.layer_types);
    const file = join(await mkdtemp(join(tmpdir(), "rlloop-timeline-")), "backward.jsonl");
    await run(model, file);

    const lines = (await readFile(file, "utf8")).trim().split("\n").map((l) => JSON.parse(l) as Line);
    expect(lines).toHaveLength(2);
    for (const line of lines) {
      expect(line.device).toBe("cpu");
      const expected = ["head", "mlp", ...[...kinds].map((k) => `layer.${k}`)].sort();
      expect(Object.keys(line.segments).sort()).toEqual(expected);
      const sum = Object.values(line.segments).reduce((a, b) => a + b, 0);
      expect(Math.abs(sum - line.total_ms)).toBeLessThanOrEqual(1e-6 * line.total_ms + 1e-9); // the intervals tile the backward
      for (const ms of Object.values(line.segments)) expect(ms).toBeGreaterThanOrEqual(0);
      // the hand-derived delta-rule node runs inside the linear-attention segments (the CUDA-only nodes are absent
      // here), and its three parts run one after another inside it
      const parts = ["gdn.delta_rule.intra_chunk", "gdn.delta_rule.recompute", "gdn.delta_rule.scan"];
      expect(Object.keys(line.nodes).sort()).toEqual(["gdn.delta_rule", ...parts]);
      expect(line.nodes["gdn.delta_rule"]!).toBeGreaterThan(0);
      expect(line.nodes["gdn.delta_rule"]!).toBeLessThanOrEqual(line.segments["layer.linear_attention"]!);
      const partsSum = parts.reduce((sum, p) => sum + line.nodes[p]!, 0);
      for (const p of parts) expect(line.nodes[p]!).toBeGreaterThan(0);
      expect(partsSum).toBeLessThanOrEqual(line.nodes["gdn.delta_rule"]! * (1 + 1e-6));
    }
  });

  it("writes nothing when the variable is unset", async () => {
    const model = await pythonFixture({ name: "tiny-a", script: "tiny_model.py", args: ["--config", "a", "--seed", "0"] });
    const file = join(await mkdtemp(join(tmpdir(), "rlloop-timeline-")), "backward.jsonl");
    await run(model, undefined);
    await expect(stat(file)).rejects.toThrow(/ENOENT/);
  });
});
