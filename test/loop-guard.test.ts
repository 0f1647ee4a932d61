// The live-outcome guard end to end (issue 23), on a real nats-server with the test-double trainer, the reloader and
// two fake vLLM replicas, and simulated robots (src/tools/sim) that regress under round 2's adapter: the regression
// is rolled back in the commit of the first round that holds round 2's rollouts (96 of them, one round), that round
// trains again from the rolled-back-to adapter (its rollouts are good data) and the replicas serve its adapter,
// rollouts of the rolled-back adapter still in flight are used, not rejected, and every rollout is in exactly one committed round and
// counted once in the live outcomes — across a restart too. Then an operator's `rlloop rollback --to-round 0` does
// the same between rounds, and one the daemon cannot do is refused. No timing: each step waits for its event.
import { execa } from "execa";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseStateRecord, STATE_BUCKET, stateKey, subjects, type AdapterRolledBack, type ReplicaEvent, type RolloutCompletedInput } from "../src/contract/index.js";
import { parseConfig } from "../src/loop/config/index.js";
import { Daemon } from "../src/loop/daemon.js";
import { readManifest } from "../src/loop/manifest.js";
import { roundDir } from "../src/loop/paths.js";
import { startReloader, type Reloader } from "../src/tools/reload/reloader.js";
import { startFakeVllm, type FakeVllm } from "./helpers/fake-vllm.js";
import { ROUND, rollouts } from "./helpers/guard-sim.js";
import { POLICY, accounting, cliArgs, eventsOn, misaccounted, publishRollouts, startLoopEnv, waitFor, REPO, type LoopEnv } from "./helpers/loop.js";
import { Kvm } from "@nats-io/kv";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const subj = subjects(POLICY);

describe("loop - the live-outcome guard rolls back an adapter that does worse on the robots", () => {
  let env: LoopEnv;
  let daemon: Daemon | null = null;
  let reloader: Reloader;
  let replicas: FakeVllm[];
  let configFile: string;
  const ids: string[] = [];
  const replicaEvents: ReplicaEvent[] = [];
  const config = () => ({
    log: { level: "error" as const },
    round: { rows: ROUND, maxWaitS: null, minRows: 1 },
    guard: { enabled: true, rewardRange: { min: 0, max: 1 }, alpha: 0.05, minEffect: 0.1, baselines: 2, minRollouts: 16 },
  });

  async function startDaemon() {
    daemon = new Daemon({ config: parseConfig(env.config(config())) });
    await daemon.start();
  }

  async function publish(list: RolloutCompletedInput[]) {
    await publishRollouts(env.js, list);
    ids.push(...list.map((r) => r.id));
  }

  async function state() {
    const kv = await new Kvm(env.nc).open(STATE_BUCKET);
    return parseStateRecord((await kv.get(stateKey(POLICY)))?.json());
  }

  const committed = (round: number) => waitFor(`round ${round} committed`, async () => {
    const m = await readManifest(roundDir(env.workDir, POLICY, round)).catch(() => null);
    return m?.status === "committed" ? m : null;
  }, 90_000);

  /** Every replica's last event names `name` as loaded. */
  const serving = (name: string) => waitFor(`every replica serving ${name}`, () => replicas.every((r) => {
    const last = replicaEvents.filter((e) => e.replica === r.url).at(-1);
    return last?.type === "replica.loaded" && last.name === name && r.loaded().some((l) => l.name === name);
  }), 60_000);

  beforeAll(async () => {
    env = await startLoopEnv();
    configFile = env.writeConfig(config());
    replicas = [await startFakeVllm(), await startFakeVllm()];
    const sub = env.nc.subscribe(subj.replicas);
    void (async () => {
      for await (const msg of sub) replicaEvents.push(msg.json<ReplicaEvent>());
    })();
    reloader = await startReloader(env.nc, {
      policy: POLICY, replicas: replicas.map((r) => r.url), dir: mkdtempSync(join(tmpdir(), "rlloop-guard-reload-")), keep: 2,
      requestTimeoutMs: 5_000, apiKey: null, pruneLocal: true, retry: { retries: 3, minTimeoutMs: 5, maxTimeoutMs: 20 },
    }, pino({ level: "silent" }));
    await startDaemon();
  });

  afterAll(async () => {
    await daemon?.stop();
    await reloader?.stop();
    for (const r of replicas ?? []) await r.close();
    await env?.close();
  });

  it("rounds 1 and 2 publish; round 3 holds round 2's regressed rollouts and rolls back to the better ancestor in its commit", async () => {
    await publish(await rollouts(0, "r0", ROUND));
    await committed(1);
    await publish(await rollouts(1, "r1", ROUND));
    await committed(2);
    await serving(`${POLICY}-r2`);
    await publish(await rollouts(2, "r2", ROUND));
    const round3 = await committed(3);
    const [rb] = await waitFor("the rollback announcement", async () => {
      const found = await eventsOn<AdapterRolledBack>(env.jsm, subj.adapterRolledBack);
      return found.length > 0 ? found : null;
    });
    expect(rb).toMatchObject({ type: "adapter.rolled_back", seq: 1, trigger: "guard", regressed: 2, from: { round: 2 }, committed_round: 3, evidence: { candidate: { round: 2, count: ROUND } } });
    expect([0, 1]).toContain(rb!.round);
    expect(rb!.evidence!.difference_upper).toBeLessThan(-0.1);
    expect(rb!.reason).toMatch(/^live-outcome guard: r2 .* is worse than r[01]/);
    // round 3's rollouts are good data: trained again from the target, not lost with the regressed lineage
    expect(round3.outcome).toBe("published");
    expect(round3.parent.round).toBe(rb!.round);
    const published = await waitFor("round 3's announcement, after the rollback's", async () => {
      const list = await eventsOn<{ round: number; parent?: number }>(env.jsm, subj.adapterPublished);
      return list.some((e) => e.round === 3) ? list : null;
    });
    expect(published.map((e) => e.round)).toEqual([1, 2, 3]);
    expect(published.at(-1)).toMatchObject({ round: 3, parent: rb!.round });
    const order = (await eventsOn<{ type: string; round: number }>(env.jsm, subj.adapters)).map((e) => `${e.type}:${e.round}`);
    expect(order).toEqual(["adapter.published:1", "adapter.published:2", `adapter.rolled_back:${rb!.round}`, "adapter.published:3"]);
    const record = await state();
    expect(record.adapter.round).toBe(3);
    expect(record.lineage.find((e) => e.round === 3)?.parent).toBe(rb!.round);
    expect(record.rollback).toMatchObject({ seq: 1, from: 2, to: rb!.round, regressed: 2, round: 3 });
    // the replicas end on round 3, the target's child, by its versioned name
    await serving(`${POLICY}-r3`);
  });

  it("training continues the target's lineage; in-flight rollouts of the rolled-back adapter are used, not rejected", async () => {
    const target = (await state()).rollback?.to ?? -1;
    const parentOf = (r: number) => (r === 3 ? target : r > 0 ? r - 1 : null);
    await publish([...(await rollouts(2, "late-r2", 8)), ...(await rollouts(3, "after", ROUND - 8, parentOf))]);
    const round4 = await committed(4).catch(async (err: Error) => {
      const rej = await eventsOn<{ id: string; reason: string; message: string }>(env.jsm, subj.rejected);
      throw new Error(`${err.message}: ${JSON.stringify(rej.slice(0, 3))} ${JSON.stringify((await state()).recent_adapters)}`);
    });
    expect(round4.parent.round).toBe(3);
    expect(round4.outcome).toBe("published");
    // the announcement follows the commit: wait for it rather than read the stream right after the manifest
    const announced = await waitFor("round 4's announcement", async () =>
      (await eventsOn<{ round: number; parent?: number }>(env.jsm, subj.adapterPublished)).find((e) => e.round === 4));
    expect(announced).toMatchObject({ round: 4, parent: 3 });
    await serving(`${POLICY}-r4`);
  });

  it("survives a restart: nothing counted twice, the rollback not announced again", async () => {
    const before = await state();
    await daemon?.stop();
    await startDaemon();
    const after = await state();
    expect(after.outcomes).toEqual(before.outcomes);
    expect(await eventsOn(env.jsm, subj.adapterRolledBack)).toHaveLength(1);
    const acc = await accounting(env);
    expect(misaccounted(acc, ids)).toEqual([]);
    // each committed rollout counted once, for the adapter that served it
    const counts = Object.fromEntries(after.outcomes.adapters.map((a) => [a.round, a.count]));
    expect(counts).toEqual({ 0: ROUND, 1: ROUND, 2: ROUND + 8, 3: ROUND - 8 });
  });

  it("an operator's rollback to round 0 happens between rounds: announced, served, continued", async () => {
    const refused = await execa(process.execPath, cliArgs("rollback", "--config", configFile, "--to-round", "9"), { cwd: REPO, reject: false });
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr).toMatch(/rollback refused: round 9 is not an adapter the loop keeps to go back to/);
    const done = await execa(process.execPath, cliArgs("rollback", "--config", configFile, "--to-round", "0", "--reason", "test: back to the SFT adapter"), { cwd: REPO });
    const event = JSON.parse(done.stdout) as AdapterRolledBack;
    expect(event).toMatchObject({ type: "adapter.rolled_back", seq: 2, trigger: "manual", round: 0, from: { round: 4 }, regressed: null, reason: "test: back to the SFT adapter", committed_round: 4 });
    expect((await state()).adapter.round).toBe(0);
    await serving(`${POLICY}-r0`);
    const parentOf = (r: number) => (r === 5 ? 0 : r > 0 ? r - 1 : null);
    await publish(await rollouts(0, "manual", ROUND, parentOf));
    const round5 = await committed(5);
    expect(round5.parent.round).toBe(0);
    const acc = await waitFor("every rollout accounted for", async () => {
      const a = await accounting(env);
      return misaccounted(a, ids).length === 0 ? a : null;
    });
    expect([...acc.rejections.keys()]).toEqual([]);
    const total = (await state()).outcomes.adapters.reduce((n, a) => n + a.count, 0);
    expect(total).toBe(ids.length);
  });
});
