// Faults the daemon survives: a nats-server restart during intake or while a resumed round reads its rollouts back, its consumer deleted by an operator, a stop
// (SIGTERM) while it is still starting or while the adapter cannot be published, an adapter the gate refuses (NaN
// statistics: round committed as rejected, rollouts acked, parent adapter kept). Trainer faults and poison rollouts:
// loop-poison.test.ts.
import { readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { parseConfig, type ConfigInput } from "../src/loop/config/index.js";
import { Daemon } from "../src/loop/daemon.js";
import { readManifest } from "../src/loop/manifest.js";
import { roundDir } from "../src/loop/paths.js";
import { EVENT_STREAM, ROLLOUT_STREAM, consumerName, subjects, type AdapterPublished, type RolloutCompletedInput } from "../src/contract/index.js";
import { StateStore } from "../src/loop/state.js";
import { POLICY, eventsOn, makeRollout, publishRollouts, settled, spawnDaemon, startLoopEnv, waitFor, type LoopEnv } from "./helpers/loop.js";

describe("loop - faults", () => {
  let env: LoopEnv | null = null;
  let daemon: Daemon | null = null;

  afterEach(async () => {
    await daemon?.stop();
    await env?.close();
    daemon = null;
    env = null;
  });

  async function start(overrides: ConfigInput = {}) {
    env = await startLoopEnv();
    daemon = new Daemon({ config: parseConfig(env.config(overrides)) });
    await daemon.start();
    return env;
  }

  /** Publish, retrying through a server outage (the publisher's job, as a rollout worker would). */
  async function publishPatiently(e: LoopEnv, rollouts: RolloutCompletedInput[]) {
    for (const r of rollouts) {
      await waitFor(`publish ${r.id}`, async () => {
        try {
          await e.js.publish(subjects(POLICY).rollouts, JSON.stringify(r), { msgID: r.id, timeout: 2000 });
          return true;
        } catch {
          return null;
        }
      });
    }
  }

  it("faults - a nats-server restart during intake loses nothing", async () => {
    const e = await start({ round: { rows: 8, maxWaitS: 1, minRows: 1 }, offPolicy: { maxStaleness: 10 }, log: { level: (process.env.TEST_LOG_LEVEL ?? "warn") as "warn" } });
    const rollouts = await Promise.all(Array.from({ length: 16 }, (_, i) => makeRollout("restart", i, { steps: 2 })));
    await publishRollouts(e.js, rollouts.slice(0, 6));
    await waitFor("intake started", () => (daemon!.snapshot().buffered_rollouts > 0 || daemon!.snapshot().round > 0 ? true : null));
    await e.server.restart();
    await publishPatiently(e, rollouts.slice(6));
    const acc = await settled(e, rollouts.map((r) => r.id));
    expect([...acc.rejections]).toEqual([]);
    const rounds = [...new Set([...acc.rounds.values()].flat())].sort((a, b) => a - b);
    const adapters = await waitFor("all announced", async () => {
      const list = await eventsOn<AdapterPublished>(e.jsm, subjects(POLICY).adapters);
      return list.length === rounds.length ? list : null;
    });
    expect(adapters.map((a) => a.round)).toEqual(rounds);
  });

  it("faults - round events sent while NATS is down are published, in order, once it is back", async () => {
    // 5 s of training: the server is down well before it ends, however loaded the machine
    const e = await start({ log: { level: "fatal" }, trainer: { env: { FAKE_TRAINER_SLEEP_MS: "5000" } } });
    await publishRollouts(e.js, await Promise.all([0, 1, 2, 3].map((i) => makeRollout("outage-events", i, { steps: 2 }))));
    await waitFor("round 1 training", async () => ((await readManifest(roundDir(e.workDir, POLICY, 1)).catch(() => null))?.status === "training" ? true : null));
    await e.server.shutdown();
    // trained while the server is down: round.trained cannot be published, and the commit waits for NATS
    await waitFor("round 1 trained during the outage", () => (daemon!.snapshot().phase === "committing" ? true : null));
    await e.server.restart();
    await waitFor("round 1 announced", async () => ((await eventsOn(e.jsm, subjects(POLICY).adapters)).length === 1 ? true : null));
    const events = await waitFor("round 1's events", async () => {
      const list = await eventsOn<{ type: string; round: number }>(e.jsm, subjects(POLICY).round("*"));
      return list.some((ev) => ev.type === "round.published") ? list : null;
    });
    expect(events.map((ev) => `${ev.type} r${ev.round}`)).toEqual(["round.closed r1", "round.assembled r1", "round.training r1", "round.trained r1", "round.committed r1", "round.published r1"]);
  });

  it("faults - an operator's rollback still waiting for its turn when the daemon stops is refused, not left unanswered", async () => {
    const e = await start({ log: { level: "error" }, trainer: { env: { FAKE_TRAINER_SLEEP_MS: "2000" } } });
    await publishRollouts(e.js, await Promise.all([0, 1, 2, 3].map((i) => makeRollout("queued", i, { steps: 2 }))));
    await waitFor("round 1 training", async () => ((await readManifest(roundDir(e.workDir, POLICY, 1)).catch(() => null))?.status === "training" ? true : null));
    const waiting = daemon!.rollback(0, "test: queued behind round 1");
    const answer = waiting.then(() => "done", (err: Error) => err.message);
    await daemon!.stop();
    expect(await answer).toMatch(/the daemon stopped before the rollback's turn/);
  });

  it("faults - a stop while a round trains lets the training finish and commits it: nothing is trained twice", async () => {
    const e = await start({ log: { level: "error" }, trainer: { env: { FAKE_TRAINER_SLEEP_MS: "2000" } } });
    await publishRollouts(e.js, await Promise.all([0, 1, 2, 3].map((i) => makeRollout("drain", i, { steps: 2 }))));
    await waitFor("round 1 training", async () => ((await readManifest(roundDir(e.workDir, POLICY, 1)).catch(() => null))?.status === "training" ? true : null));
    await daemon!.stop();
    const manifest = await readManifest(roundDir(e.workDir, POLICY, 1));
    expect([manifest?.status, manifest?.attempts]).toEqual(["committed", 1]);
  });

  it("faults - a deleted consumer is re-created and intake continues", async () => {
    const e = await start({ log: { level: (process.env.TEST_LOG_LEVEL ?? "warn") as "warn" } });
    const first = await Promise.all([0, 1, 2, 3].map((i) => makeRollout("del-a", i, { steps: 2 })));
    await publishRollouts(e.js, first);
    await waitFor("round 1", async () => (await eventsOn(e.jsm, subjects(POLICY).adapters)).length === 1);
    await waitFor("consumer deleted", () => e.jsm.consumers.delete(ROLLOUT_STREAM, consumerName(POLICY)).catch(() => null));
    const second = await Promise.all([0, 1, 2, 3].map((i) => makeRollout("del-b", i, { steps: 2, adapterRound: 1 })));
    await publishRollouts(e.js, second);
    const acc = await settled(e, [...first, ...second].map((r) => r.id));
    expect(acc.rejections.size).toBe(0);
    expect(second.map((r) => acc.rounds.get(r.id))).toEqual([[2], [2], [2], [2]]);
  });

  it("faults - a stop requested while starting waits for the opening steps, then drains without taking anything in", async () => {
    const e = (env = await startLoopEnv());
    const rollouts = await Promise.all([0, 1, 2, 3].map((i) => makeRollout("early-stop", i, { steps: 2 })));
    await publishRollouts(e.js, rollouts);
    daemon = new Daemon({ config: parseConfig(e.config()) });
    const starting = daemon.start();
    const stopping = daemon.stop(); // SIGTERM before start() has connected
    await Promise.all([starting, stopping]);
    expect(await daemon.closed).toBeNull();
    expect(daemon.snapshot().phase).toBe("stopped");
    const info = await e.jsm.consumers.info(ROLLOUT_STREAM, consumerName(POLICY));
    expect([info.delivered.consumer_seq, info.num_pending]).toEqual([0, 4]);
    // the next daemon takes them in
    daemon = new Daemon({ config: parseConfig(e.config()) });
    await daemon.start();
    const acc = await settled(e, rollouts.map((r) => r.id));
    expect(rollouts.map((r) => acc.rounds.get(r.id))).toEqual([[1], [1], [1], [1]]);
  });

  it("faults - a stop while the announcement is refused exits cleanly; the next start publishes it", async () => {
    const e = await start({ log: { level: (process.env.TEST_LOG_LEVEL ?? "error") as "error" } });
    // the events stream takes no message bigger than 8 bytes: the announcement is refused (the adapter's objects, stored
    // before the commit, are not: a refused object store holds the commit back)
    const stream = EVENT_STREAM;
    const { config } = await e.jsm.streams.info(stream);
    await e.jsm.streams.update(stream, { ...config, max_msg_size: 8 });
    const rollouts = await Promise.all([0, 1, 2, 3].map((i) => makeRollout("stop-publish", i, { steps: 2 })));
    await publishRollouts(e.js, rollouts);
    await waitFor("round 1 committed", async () => (await readManifest(roundDir(e.workDir, POLICY, 1)))?.status === "committed");
    // a retry that never gives up does not look healthy: degraded, naming the step and the server's refusal
    const health = await waitFor("degraded while the announcement is refused", async () => {
      const h = daemon!.snapshot().health;
      return h.status === "degraded" ? h : null;
    });
    expect(health.cause).toMatch(/^publish of round 1 failing \(attempt \d+, retrying\): /);
    await daemon!.stop();
    expect(await daemon!.closed).toBeNull(); // not a fatal error: the round is committed, only its announcement waits
    expect(await eventsOn(e.jsm, subjects(POLICY).adapters)).toEqual([]);

    await e.jsm.streams.update(stream, { ...config, max_msg_size: -1 });
    daemon = new Daemon({ config: parseConfig(e.config()) });
    await daemon.start();
    const adapters = await waitFor("round 1 announced by the next start", async () => {
      const list = await eventsOn<AdapterPublished>(e.jsm, subjects(POLICY).adapters);
      return list.length > 0 ? list : null;
    });
    expect(adapters.map((a) => a.round)).toEqual([1]);
    expect(daemon.snapshot().health.status).toBe("ok");
  });

  it("faults - a rollback committed but not yet announced when the daemon stops is announced once by the next start", async () => {
    const e = await start({ log: { level: (process.env.TEST_LOG_LEVEL ?? "error") as "error" } });
    await publishRollouts(e.js, await Promise.all([0, 1, 2, 3].map((i) => makeRollout("rb-crash", i, { steps: 2 }))));
    await waitFor("round 1 announced", async () => ((await eventsOn(e.jsm, subjects(POLICY).adapterPublished)).length === 1 ? true : null));
    // the events stream refuses every announcement from here: the rollback commits, its announcement cannot be made
    const { config } = await e.jsm.streams.info(EVENT_STREAM);
    await e.jsm.streams.update(EVENT_STREAM, { ...config, max_msg_size: 8 });
    const answer = daemon!.rollback(0, "test: committed, not announced").then(() => "announced", (err: Error) => err.message);
    const states = await StateStore.open(e.nc, POLICY, 1);
    await waitFor("the rollback committed", async () => ((await states.read())?.record.rollback?.to === 0 ? true : null));
    await daemon!.stop();
    expect(await daemon!.closed).toBeNull();
    expect(await answer).not.toBe("announced");
    expect(await eventsOn(e.jsm, subjects(POLICY).adapterRolledBack)).toEqual([]);

    await e.jsm.streams.update(EVENT_STREAM, { ...config, max_msg_size: -1 });
    for (const restart of [1, 2]) {
      daemon = new Daemon({ config: parseConfig(e.config()) });
      await daemon.start();
      const announced = await waitFor(`the rollback announced after restart ${restart}`, async () => {
        const list = await eventsOn<{ type: string; round: number; seq?: number }>(e.jsm, subjects(POLICY).adapters);
        return list.some((x) => x.type === "adapter.rolled_back") ? list : null;
      });
      expect(announced.map((x) => `${x.type}:${x.round}`)).toEqual(["adapter.published:1", "adapter.rolled_back:0"]);
      await daemon.stop(); // waits for the start's announcing job: what it would add is there now
      // once, after the round it rolled back from, however often the daemon starts
      const after = await eventsOn<{ type: string; round: number }>(e.jsm, subjects(POLICY).adapters);
      expect(after.map((x) => `${x.type}:${x.round}`)).toEqual(["adapter.published:1", "adapter.rolled_back:0"]);
    }
    daemon = null;
  });

  it("faults - a NATS outage while a resumed round reads its rollouts back is waited out: the round commits once", async () => {
    const e = (env = await startLoopEnv());
    // a lease that outlives the outage: this test is about the read, not about a lease lost meanwhile
    const config = e.writeConfig({ lease: { ttlS: 60 }, log: { level: "info" } });
    // the second daemon's training lasts long enough for the server to go down during it, on a loaded machine too
    const slowTraining = e.writeConfig({ trainer: { env: { FAKE_TRAINER_SLEEP_MS: "8000" } }, lease: { ttlS: 60 }, log: { level: "info" } });
    const rollouts = await Promise.all([0, 1, 2, 3].map((i) => makeRollout("resume-outage", i, { steps: 2 })));
    await publishRollouts(e.js, rollouts);
    // a daemon killed while round 1 trained (its finished output removed: the kill came first); the next start
    // resumes the round from its manifest, so its rollouts are not in memory but in the stream
    const first = spawnDaemon(config, { RLLOOP_TEST_PAUSE_AT: "training:1" });
    await first.waitForLog("pause at training", (l) => l.testPause === "training");
    first.child.kill("SIGKILL");
    await first.exited;
    const dir = roundDir(e.workDir, POLICY, 1);
    for (const name of await readdir(dir)) if (name.startsWith("adapter.tmp-")) await rm(join(dir, name, "stats.json"));
    // and a folder that did not keep its rollouts (assembled by an earlier version): they are read from the stream
    await rm(join(dir, "rollouts.jsonl"));

    const second = spawnDaemon(slowTraining);
    try {
      await waitFor("round 1 training again", async () => ((await readManifest(dir))?.attempts === 2 ? true : null));
      await e.server.shutdown(); // before that training ends: the read of the rollouts meets the outage
      await second.waitForLog("the read retried", (l) => l.msg === "rollouts of round 1 failed; retrying");
      await e.server.restart();
      const acc = await settled(e, rollouts.map((r) => r.id));
      expect(rollouts.map((r) => acc.rounds.get(r.id))).toEqual([[1], [1], [1], [1]]);
      expect([...acc.rejections]).toEqual([]);
      const manifest = await readManifest(dir);
      expect([manifest?.status, manifest?.attempts]).toEqual(["committed", 2]);
      const adapters = await waitFor("round 1 announced", async () => {
        const list = await eventsOn<AdapterPublished>(e.jsm, subjects(POLICY).adapters);
        return list.length > 0 ? list : null;
      });
      expect(adapters.map((a) => a.round)).toEqual([1]);
      second.child.kill("SIGTERM");
      expect(await second.exited).toBe(0);
    } finally {
      if (second.child.exitCode === null) second.child.kill("SIGKILL");
    }
  });

  it("faults - the gate refuses NaN statistics of a round no part of which diverges: round committed as rejected, rollouts acked, parent kept", async () => {
    const e = await start({ trainer: { env: { FAKE_TRAINER_NAN_ROUNDS: "000001" } } });
    const rollouts = await Promise.all([0, 1, 2, 3].map((i) => makeRollout("gate", i, { steps: 2 })));
    await publishRollouts(e.js, rollouts);
    const acc = await settled(e, rollouts.map((r) => r.id));
    expect(rollouts.map((r) => acc.rounds.get(r.id))).toEqual([[1], [1], [1], [1]]);
    const manifest = await readManifest(roundDir(e.workDir, POLICY, 1));
    expect(manifest?.outcome).toBe("rejected");
    expect(manifest?.reason).toContain("pg_loss is not finite");
    expect(manifest?.poisoned).toEqual([]); // isolated first: every part trained
    expect(await eventsOn(e.jsm, subjects(POLICY).rejected)).toEqual([]);
    const state = await (await StateStore.open(e.nc, POLICY, 1)).read();
    expect(state?.record.round).toBe(1);
    expect(state?.record.adapter.round).toBe(0);
    // round.rejected follows the acks that settled() waited for: wait for it too.
    const rejected = await waitFor("round.rejected announced", async () => {
      const list = (await eventsOn<{ type: string; reason: string }>(e.jsm, subjects(POLICY).rounds)).filter((r) => r.type === "round.rejected");
      return list.length > 0 ? list : null;
    });
    expect(rejected).toHaveLength(1);
    expect(await eventsOn(e.jsm, subjects(POLICY).adapters)).toEqual([]);
  });
});
