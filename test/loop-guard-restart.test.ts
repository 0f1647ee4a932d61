// The guard's rollback round across a crash (issue 23, round-runner.ts #retrainFrom): the round whose commit finds
// the regression trains again from the rollback's target; a daemon SIGKILLed during that second training leaves the
// round pending with the target as its parent and the rollback in its manifest, and the next start finishes it from
// there and commits it once, the rollback as decided: the rollback announced once, before the round's own adapter,
// every rollout in exactly one committed round. Restarted with the guard turned off, the decision no longer applies:
// the round trains again from the adapter served and commits with no rollback.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { subjects, type AdapterRolledBack } from "../src/contract/index.js";
import { readManifest } from "../src/loop/manifest.js";
import { roundDir } from "../src/loop/paths.js";
import { ROUND, rollouts } from "./helpers/guard-sim.js";
import { POLICY, accounting, eventsOn, misaccounted, publishRollouts, spawnDaemon, startLoopEnv, waitFor, type DaemonProcess, type LoopEnv } from "./helpers/loop.js";

const subj = subjects(POLICY);

const GUARD = { enabled: true, rewardRange: { min: 0, max: 1 }, alpha: 0.05, minEffect: 0.1, baselines: 2, minRollouts: 16 };

describe.each([
  { restartWith: "the same configuration", guard: GUARD },
  { restartWith: "the guard turned off", guard: { ...GUARD, enabled: false } },
])("loop - the guard's rollback round survives a crash while it trains again, restarted with $restartWith", ({ guard }) => {
  let env: LoopEnv;
  let daemon: DaemonProcess | null = null;
  const ids: string[] = [];
  const manifest = (round: number) => readManifest(roundDir(env.workDir, POLICY, round)).catch(() => null);
  const config = (g: typeof GUARD) => env.writeConfig({
    log: { level: "info" },
    round: { rows: ROUND, maxWaitS: null, minRows: 1 },
    guard: g,
    // each training takes a while, so the kill lands inside the second one
    trainer: { env: { FAKE_TRAINER_SLEEP_MS: "1500" } },
  });

  beforeAll(async () => {
    env = await startLoopEnv();
    daemon = spawnDaemon(config(GUARD));
    await daemon.waitForLog("daemon started", (l) => l.msg === "daemon started");
  });
  afterAll(async () => {
    daemon?.child.kill("SIGTERM");
    await daemon?.exited;
    await env?.close();
  });

  it("a SIGKILL during the second training leaves round 3 pending from the target; the next start commits it once (the rollback as decided, or none once the guard is off)", async () => {
    for (const [round, adapter] of [[1, 0], [2, 1], [3, 2]] as const) {
      const list = await rollouts(adapter, `r${adapter}`, ROUND);
      await publishRollouts(env.js, list);
      ids.push(...list.map((r) => r.id));
      if (round < 3) await waitFor(`round ${round} committed`, async () => ((await manifest(round))?.status === "committed" ? true : null), 90_000);
    }
    // round 3 trained from round 2, the guard found the regression: it trains again, its parent now the target
    const retraining = await waitFor("round 3 training again from the target", async () => {
      const m = await manifest(3);
      return m && m.parent.round !== 2 && m.status === "training" ? m : null;
    }, 90_000);
    daemon!.child.kill("SIGKILL");
    await daemon!.exited;
    const pending = await manifest(3);
    expect(pending?.status).not.toBe("committed");
    expect(pending?.parent.round).toBe(retraining.parent.round);
    // the rollback is the manifest's: the next start commits it as decided, not judged again
    expect(pending?.rollback).toMatchObject({ trigger: "guard", regressed: 2, from: { round: 2 }, target: { round: retraining.parent.round } });
    expect(await eventsOn(env.jsm, subj.adapterRolledBack)).toEqual([]);

    daemon = spawnDaemon(config(guard));
    const round3 = await waitFor("round 3 committed", async () => {
      const m = await manifest(3);
      return m?.status === "committed" ? m : null;
    }, 90_000);
    const order = await waitFor("round 3 announced", async () => {
      const list = (await eventsOn<{ type: string; round: number }>(env.jsm, subj.adapters)).map((e) => `${e.type}:${e.round}`);
      return list.includes("adapter.published:3") ? list : null;
    });
    if (guard.enabled) {
      expect(round3).toMatchObject({ outcome: "published", parent: { round: retraining.parent.round } });
      expect(order).toEqual(["adapter.published:1", "adapter.published:2", `adapter.rolled_back:${retraining.parent.round}`, "adapter.published:3"]);
      const [rb] = await eventsOn<AdapterRolledBack>(env.jsm, subj.adapterRolledBack);
      expect(rb).toMatchObject({ seq: 1, trigger: "guard", regressed: 2, committed_round: 3 });
    } else {
      // the decision no longer applies: trained again from the adapter served, committed as any round
      expect(round3).toMatchObject({ outcome: "published", parent: { round: 2 } });
      expect(round3?.rollback).toBeUndefined();
      expect(order).toEqual(["adapter.published:1", "adapter.published:2", "adapter.published:3"]);
    }
    expect(misaccounted(await accounting(env), ids)).toEqual([]);
  });
});
