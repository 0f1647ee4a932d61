// Isolating the rollouts a round fails on (src/loop/poison-isolation.ts), with a part trainer in memory (the search's
// own logic; test/loop-poison.test.ts runs it through the daemon and a trainer process): a rollout whose rows fail
// every time is found, one whose failure does not repeat (the host's, once: a GPU that hung past trainer.timeoutS) is
// not blamed, and a probe that fails during the search blames no one.
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Manifest } from "../src/contract/index.js";
import { isolatePoison, TrainerFaultError, type PartTrainer } from "../src/loop/poison-isolation.js";

const IDS = ["r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7"];

describe("loop - isolating the rollouts a round fails on", () => {
  let dir: string;
  const manifest = { round: 3, events: IDS.map((id, i) => ({ seq: 100 + i, id, rows: 2 })) } as unknown as Manifest;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "rlloop-isolation-"));
    await writeFile(join(dir, "train.jsonl"), IDS.flatMap((id) => [0, 1].map((step) => JSON.stringify({ name: id, step }))).join("\n") + "\n");
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** A part trainer that fails every part holding `poison`, and the first `flakyFailures` parts holding `flaky`. */
  const trainer = (opts: { poison?: string; flaky?: string; flakyFailures?: number; probeOk?: boolean }) => {
    let flakyLeft = opts.flakyFailures ?? 0;
    const parts: string[][] = [];
    const part: PartTrainer = {
      part: async (data) => {
        const names = [...new Set((await readFile(data, "utf8")).trim().split("\n").map((l) => (JSON.parse(l) as { name: string }).name))];
        parts.push(names);
        if (opts.poison && names.includes(opts.poison)) return `row named ${opts.poison} breaks training`;
        if (opts.flaky && names.includes(opts.flaky) && flakyLeft > 0) {
          flakyLeft--;
          return "ran past trainer.timeoutS (3600 s)";
        }
        return null;
      },
      probe: async () => (opts.probeOk ?? true ? { ok: true } : { ok: false, error: "the GPU is gone" }) as Awaited<ReturnType<PartTrainer["probe"]>>,
    };
    return { part, parts };
  };

  it("finds a rollout whose rows fail every time, after it failed twice on its own", async () => {
    const { part, parts } = trainer({ poison: "r5" });
    const culprits = await isolatePoison(manifest, dir, part, "round failed");
    expect(culprits.map((c) => [c.id, c.seq, c.rows])).toEqual([["r5", 105, 2]]);
    expect(parts.filter((p) => p.length === 1 && p[0] === "r5")).toHaveLength(2);
  });

  it("does not blame a rollout whose failure on its own does not repeat", async () => {
    // the host fails r2's half, its quarter and r2 alone (three hangs in a row), then r2 alone trains
    const { part, parts } = trainer({ flaky: "r2", flakyFailures: 3 });
    expect(await isolatePoison(manifest, dir, part, "round failed")).toEqual([]);
    expect(parts.filter((p) => p.length === 1 && p[0] === "r2")).toHaveLength(2);
  });

  it("a probe that fails during the search blames no one", async () => {
    const { part } = trainer({ poison: "r1", probeOk: false });
    await expect(isolatePoison(manifest, dir, part, "round failed")).rejects.toBeInstanceOf(TrainerFaultError);
  });
});
