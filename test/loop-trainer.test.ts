// The daemon with the real trainer: `rlloop train ppo` (src/train, native module, CPU fp32) on the tiny Qwen3.5
// fixture of the trainer suites, run by the daemon's CliRoundTrainer exactly as in production (working directory
// = the round folder, frames relative to it). One round: trained, gated, committed, published; the published
// adapter has the fixture adapter's tensors (same keys and shapes) and different values, and stats are finite;
// round 2 continues round 1's adapter.
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../src/loop/config.js";
import { Daemon } from "../src/loop/daemon.js";
import { readManifest } from "../src/loop/manifest.js";
import { roundDir } from "../src/loop/paths.js";
import { subjects, type AdapterPublished } from "../src/loop/schema.js";
import { POLICY, REPO, eventsOn, makeRollout, publishRollouts, startLoopEnv, waitFor, type LoopEnv } from "./helpers/loop.js";
import { readSafetensors } from "./helpers/safetensors.js";
import { trainFixture } from "./helpers/train-run.js";

describe("loop - with the real trainer (tiny model, CPU)", () => {
  let env: LoopEnv;
  let daemon: Daemon;
  let fx: string;

  beforeAll(async () => {
    fx = await trainFixture();
    env = await startLoopEnv();
    // the trainer runs from the sources through tsx (absolute loader path: its working directory is the round folder)
    const tsx = pathToFileURL(join(REPO, "node_modules", "tsx", "dist", "loader.mjs")).href;
    daemon = new Daemon({ config: parseConfig(env.config({
      adapter: { initial: join(fx, "adapter"), reference: join(fx, "ref") },
      trainer: {
        command: [process.execPath, "--import", tsx, join(REPO, "src", "cli.ts"), "train", "ppo"],
        args: ["--model", join(fx, "model"), "--prompt", join(fx, "prompt.jinja"), "--device", "cpu", "--dtype", "float32", "--batch", "2"],
        env: { RLLOOP_LOG_LEVEL: "warn" },
        maxAttempts: 1,
      },
    })) });
    await daemon.start();
  });

  afterAll(async () => {
    await daemon?.stop();
    await env?.close();
  });

  it("trains, commits and publishes a round with rlloop train ppo", async () => {
    await publishRollouts(env.js, await Promise.all([0, 1, 2, 3].map((i) => makeRollout("real", i, { steps: 2, group: `g${i % 2}` }))));
    const [published] = await waitFor("round 1 published", async () => {
      const list = await eventsOn<AdapterPublished>(env.jsm, subjects(POLICY).adapters);
      if (list.length > 0) return list;
      const manifest = await readManifest(roundDir(env.workDir, POLICY, 1)).catch(() => null);
      if (manifest?.outcome === "failed") throw new Error(`round 1 failed: ${manifest.reason}`);
      return null;
    }, 300_000);
    expect(published?.round).toBe(1);
    for (const key of ["pg_loss", "kl", "clip_frac", "logp_gap", "logp_gap_abs"] as const) expect(Number.isFinite(published?.stats[key])).toBe(true);
    expect(published?.stats.rows).toBe(8);
    const before = await readSafetensors(join(fx, "adapter", "adapter_model.safetensors"));
    const after = await readSafetensors(join(roundDir(env.workDir, POLICY, 1), "adapter", "adapter_model.safetensors"));
    expect([...after.keys()].sort()).toEqual([...before.keys()].sort());
    let changed = 0;
    for (const [key, t] of after) {
      expect(t.shape).toEqual(before.get(key)?.shape);
      if (t.data.some((v, i) => v !== before.get(key)?.data[i])) changed++;
    }
    expect(changed).toBeGreaterThan(0);
  });

  it("continues the published adapter (and its optimizer state) in the next round", async () => {
    await publishRollouts(env.js, await Promise.all([4, 5, 6, 7].map((i) => makeRollout("real", i, { steps: 2, adapterRound: 1, group: `h${i % 2}` }))));
    const list = await waitFor("round 2 published", async () => {
      const l = await eventsOn<AdapterPublished>(env.jsm, subjects(POLICY).adapters);
      return l.length === 2 ? l : null;
    }, 300_000);
    expect(list.map((a) => a.round)).toEqual([1, 2]);
    const manifest = await readManifest(roundDir(env.workDir, POLICY, 2));
    expect(manifest?.parent).toMatchObject({ round: 1, path: join(roundDir(env.workDir, POLICY, 1), "adapter") });
    expect(list[1]?.sha256).not.toBe(list[0]?.sha256);
  });
});
