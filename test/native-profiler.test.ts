// The opt-in Kineto profiler of the native module (native/src/diagnostics/profiler.h): with RLLOOP_PROFILE_TRACE and
// RLLOOP_PROFILE_WINDOWS in the environment of the process, the chosen window of worker tasks is written as a
// Chrome trace holding the model's named ranges, and no other task is traced. The model runs in a child process:
// the profiler reads the real environment, which vitest's process.env does not reach. (GPU kernels appear only on
// a GPU: bench/gpu/profile.sh.)
import { existsSync } from "node:fs";
import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import { pythonFixture } from "./helpers/fixture-cache.js";
import { REPO } from "./helpers/loop.js";

interface TraceEvent {
  name: string;
  cat?: string;
}

// three logprobs calls on one prepared batch, in a fresh process
const SCRIPT = `
const { Model } = await import(${JSON.stringify(join(REPO, "src", "native.ts"))});
const model = await Model.load(process.argv[1]);
const batch = await model.prepare([{ inputIds: Int32Array.from({ length: 24 }, (_, i) => (i * 37) % 990), images: [], scoreStart: 20, scoreCount: 4 }]);
for (let i = 0; i < 3; i++) await model.logprobs(batch, { adapter: null });
`;

describe("native profiler", () => {
  it("writes the window of tasks it was asked for, with the model's annotations", async () => {
    const model = await pythonFixture({ name: "tiny-a", script: "tiny_model.py", args: ["--config", "a", "--seed", "0"] });
    const dir = await mkdtemp(join(tmpdir(), "rlloop-profile-"));
    await execa(process.execPath, ["--import", "tsx", "--input-type=module", "-e", SCRIPT, model], {
      env: { RLLOOP_PROFILE_TRACE: join(dir, "trace.json"), RLLOOP_PROFILE_WINDOWS: "logprobs#2:1" },
    });
    expect(existsSync(join(dir, "trace-2.json")), "one window asked for: one file").toBe(false);
    const events = (JSON.parse(await readFile(join(dir, "trace-1.json"), "utf8")) as { traceEvents: TraceEvent[] }).traceEvents;
    const annotations = new Set(events.filter((e) => e.cat === "user_annotation").map((e) => e.name));
    for (const name of ["layer.linear_attention", "layer.full_attention", "gdn.core", "mlp", "lm_head"]) {
      expect(annotations, name).toContain(name);
    }
    // exactly one forward: the tiny model's linear-attention layers each solve once
    const linearLayers = events.filter((e) => e.cat === "user_annotation" && e.name === "layer.linear_attention").length;
    expect(events.filter((e) => e.cat === "cpu_op" && e.name === "aten::linalg_solve_triangular")).toHaveLength(linearLayers);
  });

  it("refuses a window list it cannot read, naming the variable and the item (a typo must not trace nothing)", async () => {
    const model = await pythonFixture({ name: "tiny-a", script: "tiny_model.py", args: ["--config", "a", "--seed", "0"] });
    const dir = await mkdtemp(join(tmpdir(), "rlloop-profile-"));
    const run = await execa(process.execPath, ["--import", "tsx", "--input-type=module", "-e", SCRIPT, model], {
      env: { RLLOOP_PROFILE_TRACE: join(dir, "trace.json"), RLLOOP_PROFILE_WINDOWS: "logprobs#2:1,bad-item" },
      reject: false,
    });
    // a JS error (exit 1), not a crash: the refusal once left the model's half-built wrapper behind (SIGSEGV)
    expect({ exitCode: run.exitCode, signal: run.signal }).toEqual({ exitCode: 1, signal: undefined });
    expect(run.stderr).toContain('Model.load: RLLOOP_PROFILE_WINDOWS: "bad-item" is not operation#k:count');
    expect(existsSync(join(dir, "trace-1.json"))).toBe(false);
  });
});
