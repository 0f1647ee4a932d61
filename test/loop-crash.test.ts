// Crash safety: the daemon runs as a child process and is SIGKILLed at each phase (RLLOOP_TEST_PAUSE_AT makes it
// wait at exactly that point), then restarted. Afterwards every rollout is in exactly one committed round or has
// exactly one recorded rejection, and every adapter was announced exactly once, in round order, each with one
// round.published lifecycle event.
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { ROLLOUT_STREAM, consumerName, subjects, type AdapterPublished, type RoundEvent } from "../src/contract/index.js";
import { readManifest } from "../src/loop/manifest.js";
import { roundDir } from "../src/loop/paths.js";
import { StateStore } from "../src/loop/state.js";
import { PAUSE_PHASES } from "../src/loop/test-hooks.js";
import {
  POLICY, accounting, eventsOn, makeRollout, misaccounted, publishRollouts, spawnDaemon, startLoopEnv, waitFor, type DaemonProcess, type LoopEnv,
} from "./helpers/loop.js";

const ROLLOUTS = 12;

/** What the restarted daemon must log, proving it took the recovery path of that phase. */
const RECOVERY_LOG: Record<string, (l: Record<string, unknown>) => boolean> = {
  intake: (l) => l.msg === "round committed" && l.round === 2,
  assembling: (l) => l.msg === "removing partial round folder of a previous run" && l.round === 2,
  // the trainer had finished: its output is gated and committed, not trained again
  training: (l) => l.msg === "using the finished training of the previous run's last attempt" && l.round === 2,
  committed: (l) => l.msg === "marking the committed round's manifest" && l.round === 2,
  publishing: (l) => l.msg === "adapter published" && l.round === 2,
  // announced before the kill: not again, but the round's lifecycle event is still owed
  announced: (l) => l.msg === "adapter already announced" && l.round === 2,
};

describe("loop - crash safety", () => {
  let env: LoopEnv | null = null;
  afterEach(async () => {
    await env?.close();
    env = null;
  });

  for (const phase of PAUSE_PHASES) {
    it(`SIGKILL at ${phase} of round 2, restart: nothing lost, nothing counted twice, no adapter published twice`, async () => {
      env = await startLoopEnv();
      // ack_wait 1 s: after the kill, the unacked rollouts come back to the restarted daemon within a second
      const config = env.writeConfig({ round: { rows: 8, maxWaitS: 1, minRows: 1 }, offPolicy: { maxStaleness: 10 }, consumer: { ackWaitS: 1, fetchBatch: 32 }, log: { level: "info" } });
      const rollouts = await Promise.all(Array.from({ length: ROLLOUTS }, (_, i) => makeRollout(`crash-${phase}`, i, { steps: 2 })));
      await publishRollouts(env.js, rollouts);

      const first = spawnDaemon(config, { RLLOOP_TEST_PAUSE_AT: `${phase}:2` });
      await first.waitForLog(`pause at ${phase}`, (l) => l.testPause === phase);
      first.child.kill("SIGKILL");
      await first.exited;

      const second = spawnDaemon(config);
      const ids = rollouts.map((r) => r.id);
      const acc = await waitFor("every rollout accounted for and nothing pending", async () => {
        const info = await env!.jsm.consumers.info(ROLLOUT_STREAM, consumerName(POLICY));
        if (info.num_ack_pending > 0 || info.num_pending > 0) return null;
        const a = await accounting(env!);
        return misaccounted(a, ids).length === 0 ? a : null;
      }, 90_000).catch(async (err: Error) => {
        throw new Error(`${err.message}: ${misaccounted(await accounting(env!), ids).join("; ")}`);
      });
      expect(misaccounted(acc, ids)).toEqual([]);

      const state = await (await StateStore.open(env.nc, POLICY, 1)).read();
      const committed = state?.record.round ?? 0;
      const adapters = await waitFor("announcement of the last round", async () => {
        const list = await eventsOn<AdapterPublished>(env!.jsm, subjects(POLICY).adapters);
        return list.length === committed ? list : null;
      });
      expect(adapters.map((a) => a.round)).toEqual(Array.from({ length: committed }, (_, i) => i + 1));
      const published = await waitFor("round.published of the last round", async () => {
        const list = await eventsOn<RoundEvent>(env!.jsm, subjects(POLICY).round("published"));
        return list.length >= committed ? list : null;
      });
      expect(published.map((e) => e.round)).toEqual(Array.from({ length: committed }, (_, i) => i + 1));

      expect(second.lines.some(RECOVERY_LOG[phase]!)).toBe(true);
      second.child.kill("SIGTERM");
      expect(await second.exited).toBe(0);
    });
  }

  it("SIGKILL between a round's commit and its poison rollout's termination: the restarted daemon terminates it, it is not trained again", async () => {
    env = await startLoopEnv();
    const config = env.writeConfig({
      round: { rows: 8, maxWaitS: 1, minRows: 1 }, consumer: { ackWaitS: 1, fetchBatch: 32 }, log: { level: "info" },
      trainer: { env: { FAKE_TRAINER_POISON: "target-poison" } },
    });
    const rollouts = await Promise.all(Array.from({ length: 4 }, (_, i) => makeRollout("killed-poison", i, { steps: 2 })));
    rollouts[2]!.steps[0]!.name = "target-poison";
    await publishRollouts(env.js, rollouts);
    const first = spawnDaemon(config, { RLLOOP_TEST_PAUSE_AT: "committed:1" });
    await first.waitForLog("pause at committed", (l) => l.testPause === "committed");
    first.child.kill("SIGKILL");
    await first.exited;

    const second = spawnDaemon(config);
    await waitFor("every message acked or terminated", async () => {
      const info = await env!.jsm.consumers.info(ROLLOUT_STREAM, consumerName(POLICY));
      return info.num_ack_pending === 0 && info.num_pending === 0 && info.delivered.stream_seq >= 4 ? true : null;
    }, 60_000);
    const acc = await accounting(env);
    expect(misaccounted(acc, rollouts.map((r) => r.id))).toEqual([]);
    expect(acc.rejections.get("killed-poison-2")).toEqual(["poison"]);
    // judged again, the poison rollout would have made a round 2 of its own and been isolated there once more
    const isolated = (await eventsOn<RoundEvent>(env.jsm, subjects(POLICY).rounds)).filter((e) => e.type === "round.isolated");
    expect(isolated.map((e) => e.round)).toEqual([1]);
    expect((await (await StateStore.open(env.nc, POLICY, 1)).read())?.record.round).toBe(1);
    second.child.kill("SIGTERM");
    expect(await second.exited).toBe(0);
  });

  it("SIGKILL after a commit made the open round's rollouts one adapter behind: redelivered, they are judged as on arrival (admitted, not stale)", async () => {
    env = await startLoopEnv();
    // strictly on-policy: a rollout of r0 that reached the stream before r1 was announced is fresh; after, it is stale
    const config = env.writeConfig({
      round: { rows: 8, maxWaitS: 600, minRows: 1 }, offPolicy: { maxStaleness: 0 }, consumer: { ackWaitS: 1, fetchBatch: 32 }, log: { level: "info" },
      trainer: { env: { FAKE_TRAINER_SLEEP_MS: "3000" } },
    });
    const first = spawnDaemon(config);
    await first.waitForLog("started", (l) => l.msg === "daemon started");
    const round1 = await Promise.all(Array.from({ length: 8 }, (_, i) => makeRollout("on-policy", i, { steps: 1 })));
    await publishRollouts(env.js, round1);
    await first.waitForLog("round 1 training", (l) => l.msg === "round assembled" && l.round === 1);
    // sampled by r0 while round 1 trains: admitted into the open round, fresh
    const open = await Promise.all(Array.from({ length: 3 }, (_, i) => makeRollout("open", i, { steps: 1 })));
    await publishRollouts(env.js, open);
    await first.waitForLog("round 1 committed", (l) => l.msg === "round committed" && l.round === 1);
    await sleep(500);
    first.child.kill("SIGKILL");
    await first.exited;

    const second = spawnDaemon(config);
    await second.waitForLog("started", (l) => l.msg === "daemon started");
    const late = await Promise.all(Array.from({ length: 5 }, (_, i) => makeRollout("late", i, { steps: 1, adapterRound: 1 })));
    await publishRollouts(env.js, late);
    const ids = [...round1, ...open, ...late].map((r) => r.id);
    const acc = await waitFor("every rollout accounted for", async () => {
      const a = await accounting(env!);
      return misaccounted(a, ids).length === 0 ? a : null;
    }, 60_000);
    expect(acc.rejections.size).toBe(0);
    expect(open.map((r) => acc.rounds.get(r.id))).toEqual([[2], [2], [2]]);
    // a rollout of r0 that reaches the stream now is one behind: stale, as it always was
    const after = await makeRollout("after", 0, { steps: 1 });
    await publishRollouts(env.js, [after]);
    const rejected = await waitFor("the late r0 rollout judged", async () => (await accounting(env!)).rejections.get(after.id) ?? null, 30_000);
    expect(rejected).toEqual(["stale_adapter"]);
    second.child.kill("SIGTERM");
    expect(await second.exited).toBe(0);
  });

  /**
   * Round 1 of four two-step rollouts, rollout `wrong`'s vllm_logp far from the test double's (its gap -0.001·vllm_logp)
   * so that it alone fails gate.maxLogpGapAbs; the daemon SIGKILLed at `phase` of round 1 and started again. Returns
   * once every rollout is accounted for, with the restarted daemon, the accounting, and round 1's last training.
   */
  async function killedWithWrongLogp(tag: string, wrong: number, phase: "attempt" | "training" | "isolated") {
    env = await startLoopEnv();
    const config = env.writeConfig({
      round: { rows: 8, maxWaitS: 1, minRows: 1 }, consumer: { ackWaitS: 1, fetchBatch: 32 }, log: { level: "info" },
      gate: { maxLogpGapAbs: 0.1, maxRolloutLogpGapAbs: 0.5 },
    });
    const rollouts = await Promise.all(Array.from({ length: 4 }, (_, i) => makeRollout(tag, i, { steps: 2 })));
    for (const step of rollouts[wrong]!.steps) step.vllm_logp = -999;
    await publishRollouts(env.js, rollouts);
    const first = spawnDaemon(config, { RLLOOP_TEST_PAUSE_AT: `${phase}:1` });
    await first.waitForLog(`pause at ${phase}`, (l) => l.testPause === phase);
    first.child.kill("SIGKILL");
    await first.exited;

    const second = spawnDaemon(config);
    const acc = await waitFor("every rollout accounted for", async () => {
      const a = await accounting(env!);
      return misaccounted(a, rollouts.map((r) => r.id)).length === 0 ? a : null;
    }, 60_000);
    const trained = (await eventsOn<RoundEvent>(env.jsm, subjects(POLICY).rounds)).filter((e) => e.type === "round.trained");
    return { second, acc, rollouts, lastTrained: trained.at(-1) };
  }

  const stop = async (daemon: DaemonProcess) => {
    daemon.child.kill("SIGTERM");
    expect(await daemon.exited).toBe(0);
  };

  it("SIGKILL right after an attempt trained with a wrong-logp rollout: the restart takes that finished attempt, takes the rollout out, and trains the rest", async () => {
    const { second, acc, lastTrained } = await killedWithWrongLogp("attempt-gap", 3, "attempt");
    expect(acc.rejections.get("attempt-gap-3")).toEqual(["logp_mismatch"]);
    expect(second.lines.some((l) => l.msg === "using the finished training of the previous run's last attempt" && l.round === 1)).toBe(true);
    expect(second.lines.some((l) => l.msg === "rollouts taken out of the round" && l.round === 1)).toBe(true);
    expect(lastTrained).toMatchObject({ round: 1, stats: { rows: 6 } });
    expect((await readManifest(roundDir(env!.workDir, POLICY, 1)))?.outcome).toBe("published");
    await stop(second);
  });

  it("SIGKILL after a round trained without its wrong-logp rollout, before the commit: the restart takes that training and rejects the rollout with its reason", async () => {
    const { second, acc, rollouts, lastTrained } = await killedWithWrongLogp("finished-gap", 2, "training");
    expect(acc.rejections.get("finished-gap-2")).toEqual(["logp_mismatch"]);
    for (const r of rollouts.filter((r) => r.id !== "finished-gap-2")) expect(acc.rounds.get(r.id), r.id).toEqual([1]);
    expect(second.lines.some((l) => l.msg === "using the finished training of the previous run's last attempt" && l.round === 1)).toBe(true);
    expect(lastTrained).toMatchObject({ round: 1, stats: { rows: 6 } });
    await stop(second);
  });

  it("SIGKILL while a rollout is taken out of its trained round (new manifest, old train.jsonl): the restart trains the manifest's rows", async () => {
    const { second, acc, lastTrained } = await killedWithWrongLogp("killed-gap", 1, "isolated");
    expect(acc.rejections.get("killed-gap-1")).toEqual(["logp_mismatch"]);
    expect(second.lines.some((l) => l.msg === "train.jsonl did not match the round's manifest: rebuilt from its events" && l.same === true)).toBe(true);
    expect(lastTrained).toMatchObject({ round: 1, stats: { rows: 6 } }); // its rows out, the others' in
    await stop(second);
  });
});

