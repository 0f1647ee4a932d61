// The daemon with the real trainer, on its default path: the resident trainer (trainer.resident, no
// trainer.command; src/loop/resident-trainer.ts) running src/train's PPO in a rank process that keeps the tiny
// Qwen3.5 fixture of the trainer suites loaded (CPU, fp32), configured by the typed trainer fields. Three rounds of 8 rows (frames
// of different sizes): each trained, gated, committed and published, each continuing the previous round's adapter.
// Every published adapter, read back from the object store, loads in PEFT (transformers' model, fp32 eager) and gives
// the native module's log-probs on its round's rows within 1e-4. `rlloop replay --round 2 --train`, with the same
// config (so the same trainer fields), rebuilds train.jsonl with the manifest's sha256 and re-trains round 2 from round
// 1's adapter with the one-shot CLI trainer: its adapter equals the committed one (each LoRA tensor's update within
// 1e-6 relative; bit-identical in practice). Last, the real trainer made to diverge by its configuration (trainer.lr
// 1e30) writes NaN statistics, its probe's too: a configuration fault, which costs no rollout — the start is refused
// by the probe, and with the probe at start off the round waits, degraded, unrejected.
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig, type ConfigInput } from "../src/loop/config/index.js";
import { Daemon } from "../src/loop/daemon.js";
import { readManifest } from "../src/loop/manifest.js";
import { roundDir } from "../src/loop/paths.js";
import { subjects, type AdapterPublished, type StatsEvent } from "../src/contract/index.js";
import { StateStore } from "../src/loop/state.js";
import { Model } from "../src/native.js";
import { expectAllClose } from "./helpers/compare.js";
import { maxAbsDifference, nativeLogprobs, peftLogprobs, roundRows } from "./helpers/adapter-logprobs.js";
import { POLICY, REPO, cliArgs, eventsOn, makeRollout, publishRollouts, startLoopEnv, waitFor, type LoopEnv } from "./helpers/loop.js";
import { fetchPublishedAdapter } from "./helpers/published-adapter.js";
import { readSafetensors } from "./helpers/safetensors.js";
import { expectSameUpdates, figure, trainFixture } from "./helpers/train-run.js";

const ROUNDS = 3;
const ROLLOUTS_PER_ROUND = 4; // × 2 steps = round.rows (8)
const LOGP_ATOL = 1e-4; // PEFT vs native module, per scored token (as in native-lora.test.ts)
const REPLAY_RTOL = 1e-6; // replayed vs committed adapter, each LoRA tensor's update, relative in L2
const sha = (bytes: Buffer | string) => createHash("sha256").update(bytes).digest("hex");

describe("loop - with the real trainer (resident, tiny model, CPU)", () => {
  let env: LoopEnv;
  let daemon: Daemon;
  let fx: string;
  let frames: string[];
  let overrides: ConfigInput;

  /** Round `round`'s rollouts (policy of round − 1), their frames the fixture's PNGs of five sizes. */
  const publishRound = async (round: number) => {
    const first = (round - 1) * ROLLOUTS_PER_ROUND;
    const rollouts = await Promise.all(Array.from({ length: ROLLOUTS_PER_ROUND }, async (_, k) => {
      const i = first + k;
      const r = await makeRollout("real", i, { steps: 2, adapterRound: round - 1, group: `r${round}g${k % 2}` });
      r.steps = r.steps.map((s, t) => ({ ...s, image: { png_base64: frames[(i + t) % frames.length]! } }));
      return r;
    }));
    await publishRollouts(env.js, rollouts);
  };
  const published = () => eventsOn<AdapterPublished>(env.jsm, subjects(POLICY).adapters);
  const waitPublished = (round: number) => waitFor(`round ${round} published`, async () => {
    const list = await published();
    if (list.length >= round) return list;
    const manifest = await readManifest(roundDir(env.workDir, POLICY, round)).catch(() => null);
    if ((manifest?.attempts ?? 0) > 1) throw new Error(`round ${round} failed an attempt (see its trainer logs)`);
    return null;
  }, 300_000);
  const adapterOf = (round: number) => join(roundDir(env.workDir, POLICY, round), "adapter");

  beforeAll(async () => {
    fx = await trainFixture();
    frames = await Promise.all([0, 1, 2, 3, 4].map(async (i) => (await readFile(join(fx, "images", `img${i}.png`))).toString("base64")));
    env = await startLoopEnv();
    overrides = {
      adapter: { initial: join(fx, "adapter"), reference: join(fx, "ref") },
      // the daemon's default trainer: resident ranks, configured by the typed trainer fields
      trainer: {
        command: null,
        resident: true,
        model: join(fx, "model"), prompt: join(fx, "prompt.jinja"), device: "cpu", dtype: "float32", batch: 2,
        env: { RLLOOP_LOG_LEVEL: "warn" },
      },
    };
    daemon = new Daemon({ config: parseConfig(env.config(overrides)) });
    await daemon.start();
  });

  afterAll(async () => {
    await daemon?.stop();
    await env?.close();
  });

  it("trains, commits and publishes a round with the resident trainer", async () => {
    await publishRound(1);
    const [first] = await waitPublished(1);
    expect(first?.round).toBe(1);
    for (const key of ["pg_loss", "kl", "clip_frac", "logp_gap", "logp_gap_abs"] as const) expect(Number.isFinite(first?.stats[key])).toBe(true);
    expect(first?.stats.rows).toBe(8);
    // CliRoundTrainer leaves trainer.<attempt>.log in the round folder; the resident trainer does not
    expect(existsSync(join(roundDir(env.workDir, POLICY, 1), "trainer.1.log"))).toBe(false);
    const before = await readSafetensors(join(fx, "adapter", "adapter_model.safetensors"));
    const after = await readSafetensors(join(adapterOf(1), "adapter_model.safetensors"));
    expect([...after.keys()].sort()).toEqual([...before.keys()].sort());
    let changed = 0;
    for (const [key, t] of after) {
      expect(t.shape).toEqual(before.get(key)?.shape);
      if (t.data.some((v, i) => v !== before.get(key)?.data[i])) changed++;
    }
    expect(changed).toBeGreaterThan(0);
  });

  it("continues the published adapter (and its optimizer state) in rounds 2 and 3", async () => {
    for (let round = 2; round <= ROUNDS; round++) {
      await publishRound(round);
      await waitPublished(round);
    }
    const list = await published();
    expect(list.map((a) => a.round)).toEqual([1, 2, 3]);
    expect(new Set(list.map((a) => a.sha256)).size).toBe(ROUNDS);
    for (let round = 2; round <= ROUNDS; round++) {
      const manifest = await readManifest(roundDir(env.workDir, POLICY, round));
      expect(manifest?.parent).toMatchObject({ round: round - 1, path: adapterOf(round - 1) });
      expect(manifest?.rows).toBe(8);
    }
  });

  it("each published adapter, read from the object store, loads in PEFT and gives the native module's log-probs", async () => {
    const list = await published();
    expect(list).toHaveLength(ROUNDS);
    const model = await Model.load(join(fx, "model"), { device: "cpu", dtype: "float32" });
    for (const event of list) {
      const dir = await fetchPublishedAdapter(env.nc, event, join(env.dir, "fetched", `r${event.round}`));
      expect(sha(readFileSync(join(dir, "adapter_model.safetensors")))).toBe(sha(readFileSync(join(adapterOf(event.round), "adapter_model.safetensors"))));
      const rows = await roundRows(join(fx, "model"), join(fx, "prompt.jinja"), roundDir(env.workDir, POLICY, event.round));
      const peft = await peftLogprobs(join(fx, "model"), dir, rows);
      const saved = await readSafetensors(join(dir, "adapter_model.safetensors"));
      expect(peft.keys, `round ${event.round}: LoRA tensors PEFT loaded`).toEqual([...saved.keys()].sort());
      const native = await nativeLogprobs(model, rows, dir);
      let worst = 0;
      for (const [r, want] of peft.rows.entries()) {
        const got = native[r]!;
        expect(want.every(Number.isFinite) && got.every(Number.isFinite), `round ${event.round} row ${r}: finite log-probs`).toBe(true);
        worst = Math.max(worst, expectAllClose(`round ${event.round} row ${r}: native vs PEFT log-probs`, got, want, [got.length], LOGP_ATOL).maxAbs);
      }
      figure(`loop round ${event.round}: published adapter, native vs PEFT log-probs, max |difference| (${rows.inputs.length} rows)`, worst, LOGP_ATOL);
      // not vacuous: the adapter moves these log-probs by far more than the tolerance
      const effect = maxAbsDifference(native, await nativeLogprobs(model, rows, null));
      console.info(`figure: loop round ${event.round}: adapter vs base model log-probs, max |difference|: ${effect.toExponential(2)}`);
      expect(effect).toBeGreaterThan(100 * LOGP_ATOL);
    }
  });

  it("replay --round 2 --train rebuilds train.jsonl and re-trains round 2 to the committed adapter (CLI trainer)", async () => {
    const states = await StateStore.open(env.nc, POLICY, 1);
    const stateBefore = await states.read();
    const out = join(env.dir, "replay-2");
    // the daemon's config: replay's trainer gets the same typed trainer fields
    const { stdout } = await execa(process.execPath, cliArgs("replay", "--round", "2", "--out", out, "--train", "--config", env.writeConfig(overrides)), { cwd: REPO });
    const answer = JSON.parse(stdout) as { match: boolean; sha256: string; rows: number; stats: { rows: number } };
    const live = roundDir(env.workDir, POLICY, 2);
    const manifest = await readManifest(live);
    expect(answer).toMatchObject({ match: true, rows: 8, sha256: manifest?.train_sha256 });
    expect(answer.stats.rows).toBe(8);
    const rebuilt = readFileSync(join(out, "train.jsonl"));
    expect(sha(rebuilt)).toBe(manifest?.train_sha256);
    expect(rebuilt.equals(readFileSync(join(live, "train.jsonl")))).toBe(true);
    // replay ran the one-shot CLI trainer (its log is in the replay folder), from round 1's adapter
    expect(existsSync(join(out, "trainer.log"))).toBe(true);
    const worst = await expectSameUpdates(adapterOf(1), join(out, "adapter"), adapterOf(2), REPLAY_RTOL);
    const identical = readFileSync(join(out, "adapter", "adapter_model.safetensors")).equals(readFileSync(join(adapterOf(2), "adapter_model.safetensors")));
    figure(`replay round 2 (${identical ? "bit-identical" : "not bit-identical"}): LoRA update vs committed, worst relative L2`, worst, REPLAY_RTOL);
    expect(await states.read()).toEqual(stateBefore);
  });

  it("a diverging configuration (trainer.lr 1e30) costs no rollout: the probe refuses the start; with it off, the round waits degraded, unrejected", async () => {
    await daemon.stop();
    const diverging = { ...overrides, trainer: { ...overrides.trainer, lr: 1e30 } };
    await expect(new Daemon({ config: parseConfig(env.config(diverging)) }).start()).rejects.toThrow(/the probe's (pg_loss|kl) is not finite \(NaN\)/);
    daemon = new Daemon({ config: parseConfig(env.config({ ...diverging, trainer: { ...diverging.trainer, probeAtStart: false } })) });
    await daemon.start();
    await publishRound(ROUNDS + 1);
    const status = await waitFor("degraded", async () => {
      const stats = (await env.nc.request(subjects(POLICY).status, "", { timeout: 2000 })).json<StatsEvent>();
      return stats.health.status === "degraded" ? stats : null;
    }, 300_000);
    expect(status.health.cause).toMatch(/(pg_loss|kl) is not finite \(NaN\)/);
    // NaN statistics survive stats.json: the attempt's were read as NaN, not as a parse error
    const manifest = await readManifest(roundDir(env.workDir, POLICY, ROUNDS + 1));
    expect(manifest?.status).toBe("training");
    expect((await (await StateStore.open(env.nc, POLICY, 1)).read())?.record.round).toBe(ROUNDS);
    expect(await eventsOn(env.jsm, subjects(POLICY).rejected)).toEqual([]);
    expect((await published()).map((a) => a.round)).toEqual([1, 2, 3]);
  });
});
