// Replay: `rlloop replay --round N` re-reads the round's events from the stream by sequence and rebuilds
// train.jsonl byte for byte (sha256 equal to the manifest's); with --train it re-runs the round from the parent
// adapter into the output folder (the test-double trainer is deterministic, so the adapter's sha256 matches the
// live round's) without touching the live state; a manifest that does not match its events is refused.
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../src/loop/config/index.js";
import { Daemon } from "../src/loop/daemon.js";
import { ReplayMismatchError } from "../src/loop/errors.js";
import { readManifest } from "../src/loop/manifest.js";
import { roundDir } from "../src/loop/paths.js";
import { replayRound } from "../src/loop/replay.js";
import { subjects } from "../src/contract/index.js";
import { StateStore } from "../src/loop/state.js";
import { POLICY, REPO, cliArgs, eventsOn, makeRollout, publishRollouts, startLoopEnv, testFrame, waitFor, type LoopEnv } from "./helpers/loop.js";

const sha = (bytes: Buffer | string) => createHash("sha256").update(bytes).digest("hex");

describe("loop - replay", () => {
  let env: LoopEnv;
  let daemon: Daemon;

  beforeAll(async () => {
    env = await startLoopEnv();
    daemon = new Daemon({ config: parseConfig(env.config({ advantage: { estimator: "rloo" } })) });
    await daemon.start();
    // frames by path for half the rollouts: replay must read them from the frame root again
    writeFileSync(join(env.framesRoot, "f.png"), await testFrame());
    const rollouts = await Promise.all([0, 1, 2, 3].map((i) => makeRollout("replay", i, { steps: 2, group: `g${i % 2}` })));
    rollouts[1]!.steps = rollouts[1]!.steps.map((s) => ({ ...s, image: { path: "f.png" } }));
    await publishRollouts(env.js, rollouts);
    await waitFor("round 1 published", async () => (await eventsOn(env.jsm, subjects(POLICY).adapters)).length === 1);
  });

  afterAll(async () => {
    await daemon?.stop();
    await env?.close();
  });

  it("replay - rebuilds train.jsonl byte for byte", async () => {
    const config = parseConfig(env.config());
    const out = join(env.dir, "replay-1");
    const result = await replayRound({ config, round: 1, out });
    const live = readFileSync(join(roundDir(env.workDir, POLICY, 1), "train.jsonl"));
    const rebuilt = readFileSync(join(out, "train.jsonl"));
    expect(rebuilt.equals(live)).toBe(true);
    expect(sha(rebuilt)).toBe((await readManifest(roundDir(env.workDir, POLICY, 1)))?.train_sha256);
    expect(result.sha256).toBe(sha(live));
    expect(readdirSync(join(out, "frames")).sort()).toEqual(readdirSync(join(roundDir(env.workDir, POLICY, 1), "frames")).sort());
  });

  it("replay - --train re-runs the round from its parent without touching the state (CLI)", async () => {
    const states = await StateStore.open(env.nc, POLICY, 1);
    const before = await states.read();
    const out = join(env.dir, "replay-train");
    const { stdout } = await promisify(execFile)(process.execPath, cliArgs("replay", "--round", "1", "--out", out, "--train", "--config", env.writeConfig()), { cwd: REPO });
    const answer = JSON.parse(stdout) as { match: boolean; sha256: string; stats: { rows: number } };
    expect(answer.match).toBe(true);
    expect(answer.stats.rows).toBe(8);
    const live = readFileSync(join(roundDir(env.workDir, POLICY, 1), "adapter", "adapter_model.safetensors"));
    expect(sha(readFileSync(join(out, "adapter", "adapter_model.safetensors")))).toBe(sha(live));
    expect(await states.read()).toEqual(before);
  });

  it("replay - refuses a manifest its events do not reproduce", async () => {
    const dir = roundDir(env.workDir, POLICY, 1);
    const manifestPath = join(dir, "manifest.json");
    const original = readFileSync(manifestPath, "utf8");
    const tampered = JSON.parse(original) as { advantage: { estimator: string } };
    tampered.advantage.estimator = "grpo";
    writeFileSync(manifestPath, JSON.stringify(tampered));
    try {
      await expect(replayRound({ config: parseConfig(env.config()), round: 1, out: join(env.dir, "replay-bad") })).rejects.toThrow(ReplayMismatchError);
      await expect(replayRound({ config: parseConfig(env.config()), round: 1, out: join(env.dir, "replay-bad") })).rejects.toThrow("rebuilt train.jsonl has sha256");
    } finally {
      writeFileSync(manifestPath, original);
    }
  });
});
