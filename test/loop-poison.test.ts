// "A rollout is rejected only for what is wrong with it; no fault of the trainer, the host, the configuration or
// another rollout costs a good rollout or stops the stream" (docs/daemon.md "Faults"), against a real nats-server
// and the test-double trainer: bounded judging (deep nesting, huge strings, extreme numbers, redelivered too often),
// a poison rollout inside a good round, a trainer broken for a while, a daemon killed during training again and
// again, a second daemon on the same work dir, misconfigured starts, a late duplicate many rounds later.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { Kvm } from "@nats-io/kv";
import { Objm } from "@nats-io/obj";
import sharp from "sharp";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { consumerName, IDS_BUCKET, ROLLOUT_STREAM, subjects, type StatsEvent } from "../src/contract/index.js";
import { checkAdapterFiles } from "../src/loop/adapter-files.js";
import { ConsumedIds } from "../src/loop/consumed-ids.js";
import { parseConfig, type ConfigInput } from "../src/loop/config/index.js";
import { Daemon } from "../src/loop/daemon.js";
import { Intake } from "../src/loop/intake.js";
import { readManifest } from "../src/loop/manifest.js";
import { incomingDir, roundDir } from "../src/loop/paths.js";
import { setTimeout as sleep } from "node:timers/promises";
import {
  POLICY, REPO, accounting, bytesStream, cliArgs, eventsOn, makeRollout, publishRollouts, settled, spawnDaemon, startLoopEnv, testFrame, waitFor, type LoopEnv,
} from "./helpers/loop.js";

const quiet = { log: { level: "error" as const } };

describe("loop - a good rollout is never lost to someone else's fault", () => {
  let env: LoopEnv | null = null;
  let daemon: Daemon | null = null;

  afterEach(async () => {
    await daemon?.stop();
    await env?.close();
    daemon = null;
    env = null;
  });

  async function start(overrides: ConfigInput = {}) {
    env ??= await startLoopEnv();
    daemon = new Daemon({ config: parseConfig(env.config({ ...quiet, ...overrides })) });
    await daemon.start();
    return env;
  }

  const rejection = (acc: Awaited<ReturnType<typeof accounting>>, key: string) => acc.rejections.get(key);

  /**
   * A daemon whose trainer `fault` breaks (a fake-trainer variable naming a file: broken while it exists) and a round
   * of 8 one-step rollouts it cannot train; returns once the daemon says it is degraded, with that status.
   */
  async function roundOnBrokenTrainer(fault: "FAKE_TRAINER_FAIL_WHILE" | "FAKE_TRAINER_NAN_WHILE" | "FAKE_TRAINER_TORN_WHILE", tag: string) {
    const e = (env = await startLoopEnv());
    const file = join(e.dir, `${tag}-fault`);
    const config: ConfigInput = { trainer: { env: { [fault]: file }, retryMinS: 0.2, retryMaxS: 0.5 } };
    await start(config);
    writeFileSync(file, "");
    const rollouts = await Promise.all(Array.from({ length: 8 }, (_, i) => makeRollout(tag, i, { steps: 1 })));
    await publishRollouts(e.js, rollouts);
    const degraded = await waitFor("degraded", async () => {
      const stats = (await e.nc.request(subjects(POLICY).status, "", { timeout: 2000 })).json<StatsEvent>();
      return stats.health.status === "degraded" ? stats : null;
    });
    return { e, file, config, rollouts, degraded };
  }

  it("judges every event in bounded time: deep nesting, huge strings and extreme numbers are rejected with their reasons; nothing pins max_ack_pending", async () => {
    // max_ack_pending 8: before bounded judging, a handful of unjudgeable messages redelivered forever stopped the stream
    const e = await start({ consumer: { ackWaitS: 2, fetchBatch: 4, maxAckPending: 8 } });
    const deep = (n: number) => "[".repeat(n) + "]".repeat(n);
    const good = await makeRollout("base", 0, { steps: 1 });
    const raw: Array<[string, string, string]> = [];
    for (let i = 0; i < 12; i++) raw.push([`deep-${i}`, deep(5000), "too_deep"]);
    raw.push(["deep-reward", JSON.stringify({ ...good, id: "deep-reward" }).replace('"reward":', `"reward":${deep(4000)},"x":`), "too_deep"]);
    raw.push(["deep-id", JSON.stringify({ ...good, id: "x" }).replace('"id":"x"', `"id":${deep(4000)}`), "too_deep"]);
    const bigName = { ...good, id: "big-name", steps: [{ ...good.steps[0]!, name: "n".repeat(200_000) }] };
    raw.push(["big-name", JSON.stringify(bigName), "string_too_long"]);
    const bigMemory = { ...good, id: "big-memory", steps: [{ ...good.steps[0]!, memory: ["0".repeat(100_000), "1"] }] };
    raw.push(["big-memory", JSON.stringify(bigMemory), "string_too_long"]);
    raw.push(["huge-reward", JSON.stringify({ ...good, id: "huge-reward", reward: 1.7e308 }), "reward_out_of_range"]);
    raw.push(["tiny-logp", JSON.stringify({ ...good, id: "tiny-logp", steps: [{ ...good.steps[0]!, vllm_logp: -1e308 }] }), "logp_out_of_range"]);
    raw.push(["huge-step-reward", JSON.stringify({ ...good, id: "huge-step-reward", steps: [{ ...good.steps[0]!, reward: -1e300 }] }), "reward_out_of_range"]);
    raw.push(["big-meta", JSON.stringify({ ...good, id: "big-meta", notes: "m".repeat(70_000) }), "meta_too_large"]);
    // unpaired surrogates (valid JSON escapes): as UTF-8 both ids would be "lone-\ufffd", one the other's duplicate
    for (const id of ["lone-\udc80", "lone-\udcff"]) raw.push([id, JSON.stringify({ ...good, id }), "invalid_schema"]);
    raw.push(["lone-name", JSON.stringify({ ...good, id: "lone-name", steps: [{ ...good.steps[0]!, name: "cup\ud800" }] }), "invalid_schema"]);
    // what would fail every training attempt of a round: a name that tokenizes as an image placeholder, a frame
    // whose aspect ratio the image processor refuses
    raw.push(["pad-name", JSON.stringify({ ...good, id: "pad-name", steps: [{ ...good.steps[0]!, name: "cup <|image_pad|>" }] }), "invalid_schema"]);
    const thin = (await sharp({ create: { width: 201, height: 1, channels: 3, background: "#808080" } }).png().toBuffer()).toString("base64");
    raw.push(["nul-path", JSON.stringify({ ...good, id: "nul-path", steps: [{ ...good.steps[0]!, image: { path: "cam\u0000/1.png" } }] }), "invalid_schema"]);
    raw.push(["long-path", JSON.stringify({ ...good, id: "long-path", steps: [{ ...good.steps[0]!, image: { path: `${"a".repeat(300)}.png` } }] }), "image_missing"]);
    raw.push(["thin-frame", JSON.stringify({ ...good, id: "thin-frame", steps: [{ ...good.steps[0]!, image: { png_base64: thin } }] }), "image_shape"]);
    const seqs = new Map<string, number>();
    // message ids of ASCII: a header carries UTF-8, where the two unpaired-surrogate ids are one (a duplicate publish)
    for (const [id, payload] of raw) seqs.set(id, (await e.js.publish(subjects(POLICY).rollouts, payload, { msgID: `judge-${seqs.size}` })).seq);
    // good rollouts behind them still flow into rounds
    const goods = await Promise.all(Array.from({ length: 8 }, (_, i) => makeRollout("behind", i, { steps: 1 })));
    await publishRollouts(e.js, goods);
    const acc = await settled(e, goods.map((r) => r.id));
    for (const [id, , reason] of raw) {
      const key = acc.rejections.has(id) ? id : `seq:${seqs.get(id)}`;
      expect(rejection(acc, key), id).toEqual([reason]);
    }
    expect(goods.every((r) => (acc.rounds.get(r.id)?.length ?? 0) === 1)).toBe(true);
  });

  it("a good rollout delivered more than intake.maxDeliveries times (restarts, outages) is admitted; one whose judgement keeps failing while the consumer is at its limit is rejected undeliverable with its last error", async () => {
    const e = (env = await startLoopEnv());
    const good = await makeRollout("redelivered", 0, { steps: 1 });
    await publishRollouts(e.js, [good]);
    // the daemon's durable consumer, as crashed daemons left it: the message delivered three times already
    const config = parseConfig(e.config(quiet));
    await new Intake(e.js, e.jsm, { policy: POLICY, consumer: config.consumer, round: config.round, startSeq: () => 1 }, pino({ level: "silent" })).ensureConsumer();
    const consumer = await e.js.consumers.get(ROLLOUT_STREAM, consumerName(POLICY));
    for (let i = 0; i < 3; i++) {
      const msg = await consumer.next({ expires: 5000 });
      msg?.nak();
    }
    // its frame comes from an object store that does not exist: the configuration's fault, judged again 5 s, 10 s later
    const unlucky = await makeRollout("unlucky", 0, { steps: 1 });
    unlucky.steps[0]!.image = { object: "cam/frame.png" };
    // max_ack_pending 1: the waiting rollout alone keeps the server from handing out the one behind it
    await start({ intake: { maxDeliveries: 1 }, consumer: { maxAckPending: 1 }, frames: { roots: [e.framesRoot], objectBucket: "no-such-frames" }, round: { rows: 1 }, log: { level: "fatal" } });
    await publishRollouts(e.js, [unlucky]);
    const behind = await makeRollout("behind-unlucky", 0, { steps: 1 });
    await publishRollouts(e.js, [behind]);
    const acc = await settled(e, [good.id, unlucky.id, behind.id]);
    expect(acc.rounds.get(good.id)).toEqual([1]);
    expect(rejection(acc, good.id)).toBeUndefined();
    expect(rejection(acc, unlucky.id)).toEqual(["undeliverable"]);
    expect(acc.rounds.get(behind.id)).toEqual([2]);
    expect(daemon!.snapshot().health).toEqual({ status: "ok", cause: null, since: null }); // nothing waits any more
    const events = await eventsOn<{ id: string; message: string }>(e.jsm, subjects(POLICY).rejected);
    expect(events.find((r) => r.id === unlucky.id)?.message).toMatch(/^delivered 3 times \(intake.maxDeliveries 1\), its last 3 judgements failed, and the rollouts waiting hold the stream \(max_ack_pending 1 reached, 1 behind\); last error: .*the frames object store does not exist/);
  });

  it("a rollout whose judgement keeps failing for a fault not its own waits, past intake.maxDeliveries, while it holds nothing back", async () => {
    const e = (env = await startLoopEnv());
    // its frame comes from an object store that does not exist (the configuration's fault); the consumer has room
    const unlucky = await makeRollout("waits", 0, { steps: 1 });
    unlucky.steps[0]!.image = { object: "cam/frame.png" };
    const config = e.writeConfig({ intake: { maxDeliveries: 1 }, frames: { objectBucket: "no-such-frames" }, round: { rows: 1 }, log: { level: "info" } });
    const daemonProcess = spawnDaemon(config);
    try {
      await publishRollouts(e.js, [unlucky]);
      // its third judgement: the one that rejected it before, as soon as it had been delivered more than once
      await daemonProcess.waitForLog("the third judgement failed", (l) => l.msg === "cannot admit rollout now; will be redelivered" && l.deliveries === 3);
      // a fault that lasts: the daemon says so, naming it
      const status = (await e.nc.request(subjects(POLICY).status, "", { timeout: 5000 })).json<StatsEvent>();
      expect(status.health.status).toBe("degraded");
      expect(status.health.cause).toMatch(/^1 rollout failed to be judged 3 times in a row for a reason not theirs, waiting \(nak'd\); last error: .*the frames object store does not exist/);
      const good = await makeRollout("flows", 0, { steps: 1 });
      await publishRollouts(e.js, [good]);
      const acc = await waitFor("the good rollout trained", async () => {
        const a = await accounting(e);
        return a.rounds.has(good.id) ? a : null;
      });
      expect(acc.rounds.get(good.id)).toEqual([1]);
      expect([...acc.rejections.keys()]).toEqual([]);
      const waiting = await e.jsm.consumers.info(ROLLOUT_STREAM, consumerName(POLICY));
      expect(waiting.num_ack_pending).toBe(1);
    } finally {
      daemonProcess.child.kill("SIGTERM");
      await daemonProcess.exited;
    }
  });

  it("a fault that holds more rollouts than two rounds' room does not hold the stream: the others train, none is rejected", async () => {
    // two rounds, one fetch and the slack make 76 pending at most; the fault holds 100. Without room for waiting
    // rollouts the server hands out nothing behind them until they are rejected (hours of redeliveries)
    const e = await start({ round: { rows: 2 }, consumer: { fetchBatch: 4 }, frames: { objectBucket: "no-such-frames" }, log: { level: "fatal" } });
    const held: Awaited<ReturnType<typeof makeRollout>>[] = [];
    for (let i = 0; i < 100; i++) {
      const r = await makeRollout("held-by-fault", i, { steps: 1 });
      r.steps[0]!.image = { object: `cam/${i}.png` };
      held.push(r);
    }
    await publishRollouts(e.js, held);
    const good = [await makeRollout("behind-the-fault", 0, { steps: 1 }), await makeRollout("behind-the-fault", 1, { steps: 1 })];
    await publishRollouts(e.js, good);
    const acc = await waitFor("the rollouts behind the fault trained", async () => {
      const a = await accounting(e);
      return good.every((r) => a.rounds.has(r.id)) ? a : null;
    });
    expect(good.map((r) => acc.rounds.get(r.id))).toEqual([[1], [1]]);
    expect([...acc.rejections.keys()]).toEqual([]);
    // the round's acks follow its commit: every one held by the fault still waits for it, and only those
    const consumer = await waitFor("the round's acks", async () => {
      const info = await e.jsm.consumers.info(ROLLOUT_STREAM, consumerName(POLICY));
      return info.num_ack_pending === 100 ? info : null;
    });
    expect(consumer.config.max_ack_pending).toBe(2 * 2 + 2 * 4 + 64 + 10_000);
  });

  it("a message whose id a round recorded but did not commit (a dead daemon's, taken over without its folders) is trained, not acked as committed", async () => {
    const e = await start({ round: { rows: 2 }, frames: { objectBucket: "waiting-frames" }, log: { level: "fatal" } });
    // X waits on its frame (the bucket is not there yet) below the sequences a committed round takes
    const x = await makeRollout("recorded", 0, { steps: 1 });
    x.steps[0]!.image = { object: "cam/x.png" };
    await publishRollouts(e.js, [x]);
    const first = [await makeRollout("first", 0, { steps: 1 }), await makeRollout("first", 1, { steps: 1 })];
    await publishRollouts(e.js, first);
    await waitFor("round 1 committed", async () => ((await accounting(e)).rounds.has(first[1]!.id) ? true : null));
    // what an active daemon that took X into round 2 recorded just before it died, short of the commit
    await ConsumedIds.of(await new Kvm(e.nc).open(IDS_BUCKET), POLICY).record(2, [{ seq: 1, id: x.id }]);
    const objects = await new Objm(e.nc).create("waiting-frames");
    await objects.put({ name: "cam/x.png" }, bytesStream(await testFrame()));
    const next = await makeRollout("next", 0, { steps: 1 });
    await publishRollouts(e.js, [next]);
    const acc = await settled(e, [x.id, next.id]);
    expect([acc.rounds.get(x.id), acc.rounds.get(next.id)]).toEqual([[2], [2]]);
    expect(acc.rejections.size).toBe(0);
  });

  it("an id recorded by a round that did not train it (not committed, or committed under that number without it) is no duplicate: the rollout trains", async () => {
    const e = await start({ round: { rows: 2 } });
    const first = [await makeRollout("first", 0, { steps: 1 }), await makeRollout("first", 1, { steps: 1 })];
    await publishRollouts(e.js, first);
    await settled(e, first.map((r) => r.id));
    // left by daemons that died before their commits: round 1 committed since without sequence 77, round 9 never did
    const ids = ConsumedIds.of(await new Kvm(e.nc).open(IDS_BUCKET), POLICY);
    await ids.record(1, [{ seq: 77, id: "stale-0" }]);
    await ids.record(9, [{ seq: 78, id: "stale-1" }]);
    const stale = [await makeRollout("stale", 0, { steps: 1 }), await makeRollout("stale", 1, { steps: 1 })];
    await publishRollouts(e.js, stale);
    const acc = await settled(e, [...first, ...stale].map((r) => r.id));
    expect(stale.map((r) => acc.rounds.get(r.id))).toEqual([[2], [2]]);
    expect(acc.rejections.size).toBe(0);
  });

  it("a rollout that waits until it would leave the stream (stream.maxAgeS) is rejected undeliverable, not lost without a record", async () => {
    const e = await start({ stream: { maxAgeS: 30, duplicateWindowS: 20 }, frames: { objectBucket: "no-such-frames" }, log: { level: "fatal" } });
    const unlucky = await makeRollout("expiring", 0, { steps: 1 });
    unlucky.steps[0]!.image = { object: "cam/frame.png" };
    await publishRollouts(e.js, [unlucky]);
    // judged at 0, 5 and 15 s: the next one, 20 s later, would come after the stream dropped it
    const acc = await waitFor("its rejection", async () => {
      const a = await accounting(e);
      return a.rejections.has(unlucky.id) ? a : null;
    });
    expect(rejection(acc, unlucky.id)).toEqual(["undeliverable"]);
    const events = await eventsOn<{ id: string; message: string }>(e.jsm, subjects(POLICY).rejected);
    expect(events.find((r) => r.id === unlucky.id)?.message).toMatch(/^its judgement has failed for \d+ s: it would leave the stream \(stream.maxAgeS 30 s\) before its next one; last error: .*the frames object store does not exist/);
  });

  it("isolates a poison rollout inside a good round: only it is rejected (poison, naming the trainer's error), the round is published", async () => {
    const e = await start({ trainer: { env: { FAKE_TRAINER_POISON: "target-poison" } } });
    const rollouts = await Promise.all(Array.from({ length: 6 }, (_, i) => makeRollout("iso", i, { steps: 1 })));
    rollouts[4]!.steps[0]!.name = "target-poison";
    await publishRollouts(e.js, rollouts.slice(0, 6));
    await publishRollouts(e.js, await Promise.all([6, 7].map((i) => makeRollout("iso", i, { steps: 1 }))));
    const ids = Array.from({ length: 8 }, (_, i) => `iso-${i}`);
    const acc = await settled(e, ids);
    expect(rejection(acc, "iso-4")).toEqual(["poison"]);
    for (const id of ids.filter((id) => id !== "iso-4")) expect(acc.rounds.get(id), id).toEqual([1]);
    const manifest = await readManifest(roundDir(e.workDir, POLICY, 1));
    expect(manifest).toMatchObject({ status: "committed", outcome: "published", rows: 7 });
    expect(manifest?.poisoned.map((p) => p.id)).toEqual(["iso-4"]);
    const [rejected] = await eventsOn<{ reason: string; message: string; round: number }>(e.jsm, subjects(POLICY).rejected);
    expect(rejected).toMatchObject({ reason: "poison", round: 1 });
    expect(rejected?.message).toContain("row named target-poison breaks training");
    const isolated = (await eventsOn<{ type: string; poisoned: Array<{ id: string }> }>(e.jsm, subjects(POLICY).rounds)).filter((r) => r.type === "round.isolated");
    expect(isolated.map((r) => r.poisoned.map((p) => p.id))).toEqual([["iso-4"]]);
    const announced = await waitFor("round 1 announced", async () => (await eventsOn(e.jsm, subjects(POLICY).adapterPublished)).length === 1 || null);
    expect(announced).toBe(true);
  });

  it("a copy of a rollout id whose other copy its round takes out (poison) waits for that round and trains in the next, not rejected as a duplicate", async () => {
    const e = await start({ trainer: { env: { FAKE_TRAINER_POISON: "target-poison", FAKE_TRAINER_SLEEP_MS: "500" } } });
    const rollouts = await Promise.all(Array.from({ length: 8 }, (_, i) => makeRollout("twin", i, { steps: 1 })));
    const fine = structuredClone(rollouts[4]!);
    rollouts[4]!.steps[0]!.name = "target-poison";
    const seqs = await publishRollouts(e.js, rollouts);
    await waitFor("round 1 training", () => daemon!.snapshot().training_round === 1 || null);
    // the same id under another message id, its step fine: it arrives while round 1 holds the first copy
    const copySeq = (await e.js.publish(subjects(POLICY).rollouts, JSON.stringify(fine), { msgID: "twin-4-again" })).seq;
    await publishRollouts(e.js, await Promise.all(Array.from({ length: 7 }, (_, i) => makeRollout("next", i, { steps: 1 }))));
    const acc = await waitFor("the copy trained or rejected", async () => {
      const a = await accounting(e);
      return a.rounds.has("twin-4") || (a.rejections.get("twin-4")?.length ?? 0) > 1 ? a : null;
    }, 330_000); // its next judgement: the redelivery backoff doubles from 5 s to 5 min while round 1 isolates the poison
    expect(acc.rounds.get("twin-4")).toEqual([2]);
    const rejected = await eventsOn<{ seq: number; reason: string }>(e.jsm, subjects(POLICY).rejected);
    expect(rejected.map((r) => [r.seq, r.reason])).toEqual([[seqs[4], "poison"]]);
    expect((await readManifest(roundDir(e.workDir, POLICY, 2)))?.events.find((ev) => ev.id === "twin-4")?.seq).toBe(copySeq);
  });

  it("copies of an id in the open round wait only while they fit the room for waiting rollouts: the others are duplicates at once", async () => {
    const e = await start({ consumer: { waitingRollouts: 2 } });
    const first = await makeRollout("held", 0, { steps: 1 });
    await publishRollouts(e.js, [first]);
    const copies: number[] = [];
    for (let k = 0; k < 4; k++) copies.push((await e.js.publish(subjects(POLICY).rollouts, JSON.stringify(first), { msgID: `held-0-copy-${k}` })).seq);
    const rejectedNow = await waitFor("two copies rejected", async () => {
      const list = await eventsOn<{ seq: number; reason: string; message: string }>(e.jsm, subjects(POLICY).rejected);
      return list.length >= 2 ? list : null;
    });
    await sleep(1000); // the round stays open: the other two wait
    expect(await eventsOn(e.jsm, subjects(POLICY).rejected)).toHaveLength(2);
    const metrics = `http://127.0.0.1:${daemon!.metricsPort}/metrics`;
    expect(await (await fetch(metrics)).text()).toMatch(/^rlloop_copies_waiting 2$/m);
    for (const r of rejectedNow) {
      expect(r.reason).toBe("duplicate_id");
      expect(r.message).toMatch(/already taken into a round under stream sequence 1, and the 2 rollouts waiting fill the room for them \(consumer\.waitingRollouts 2\)$/);
    }
    await publishRollouts(e.js, await Promise.all(Array.from({ length: 7 }, (_, i) => makeRollout("fill", i, { steps: 1 }))));
    const all = await waitFor("every copy rejected", async () => {
      const list = await eventsOn<{ seq: number; reason: string; message: string }>(e.jsm, subjects(POLICY).rejected);
      return list.length === 4 ? list : null;
    }, 330_000); // their next judgement after round 1 commits: the backoff doubles from 5 s to 5 min
    expect(all.map((r) => r.seq).sort((a, b) => a - b)).toEqual(copies);
    for (const r of all.slice(2)) expect(r.message).toContain("consumed by a committed round");
    const acc = await settled(e, ["fill-0"]);
    expect(acc.rounds.get("held-0")).toEqual([1]);
    expect(await (await fetch(metrics)).text()).toMatch(/^rlloop_copies_waiting 0$/m);
  });

  it("a copy of an id in the open round is a duplicate at once where its next judgement could come after the id memory forgot that round, or no room is kept", async () => {
    for (const [overrides, why] of [
      [{ intake: { duplicateWindowS: 8 } }, /its next judgement, in \d+ s, could come after the id memory forgot that round \(intake\.duplicateWindowS 8 s\)$/],
      [{ consumer: { maxAckPending: 50 } }, /no room is kept for rollouts to wait \(consumer\.maxAckPending 50 less the rounds' own \d+\)$/],
    ] as const) {
      const e = await start(overrides);
      const first = await makeRollout("forgot", 0, { steps: 1 });
      await publishRollouts(e.js, [first]);
      await e.js.publish(subjects(POLICY).rollouts, JSON.stringify(first), { msgID: "forgot-0-copy" });
      const [rejected] = await waitFor("the copy rejected", async () => {
        const list = await eventsOn<{ reason: string; message: string }>(e.jsm, subjects(POLICY).rejected);
        return list.length > 0 ? list : null;
      });
      expect(rejected?.reason).toBe("duplicate_id");
      expect(rejected?.message, rejected?.message).toMatch(why);
      await daemon?.stop();
      await env?.close();
      env = daemon = null;
    }
  });

  it("a rollout that makes training diverge (NaN statistics, the probe's finite) is isolated as poison: the rest of its round is published", async () => {
    const e = await start({ trainer: { env: { FAKE_TRAINER_NAN_NAME: "target-nan" } } });
    const rollouts = await Promise.all(Array.from({ length: 8 }, (_, i) => makeRollout("nans", i, { steps: 1 })));
    rollouts[6]!.steps[0]!.name = "target-nan";
    await publishRollouts(e.js, rollouts);
    const acc = await settled(e, rollouts.map((r) => r.id));
    expect(rejection(acc, "nans-6")).toEqual(["poison"]);
    for (const r of rollouts.filter((r) => r.id !== "nans-6")) expect(acc.rounds.get(r.id), r.id).toEqual([1]);
    const [rejected] = await eventsOn<{ message: string }>(e.jsm, subjects(POLICY).rejected);
    expect(rejected?.message).toMatch(/its statistics are not finite \(pg_loss is not finite/);
    const manifest = await readManifest(roundDir(e.workDir, POLICY, 1));
    expect(manifest).toMatchObject({ outcome: "published", rows: 7 });
    // no diverged attempt's output is left behind in the round folder
    expect(readdirSync(roundDir(e.workDir, POLICY, 1)).filter((n) => n.startsWith("adapter.tmp"))).toEqual([]);
  });

  it("a round half or more of whose rollouts diverge on their own (a configuration the probe's job does not show) blames no one: the gate rejects it", async () => {
    const e = await start({ trainer: { env: { FAKE_TRAINER_NAN_NAME: "target-nan" } } });
    const rollouts = await Promise.all(Array.from({ length: 4 }, (_, i) => makeRollout("halfnan", i, { steps: 2 })));
    for (const r of rollouts.slice(0, 2)) r.steps[0]!.name = "target-nan";
    await publishRollouts(e.js, rollouts);
    const acc = await settled(e, rollouts.map((r) => r.id));
    expect(acc.rejections.size).toBe(0);
    expect(rollouts.map((r) => acc.rounds.get(r.id))).toEqual([[1], [1], [1], [1]]);
    expect(await readManifest(roundDir(e.workDir, POLICY, 1))).toMatchObject({ outcome: "rejected", poisoned: [], reason: expect.stringContaining("pg_loss is not finite") });
  });

  it("a rollout whose training ends in NaN weights (finite statistics) is isolated as poison: the rest of its round is published whole", async () => {
    const e = await start({ trainer: { env: { FAKE_TRAINER_NAN_WEIGHTS: "target-diverges" } } });
    const rollouts = await Promise.all(Array.from({ length: 8 }, (_, i) => makeRollout("nanw", i, { steps: 1 })));
    rollouts[2]!.steps[0]!.name = "target-diverges";
    await publishRollouts(e.js, rollouts);
    const acc = await settled(e, rollouts.map((r) => r.id));
    expect(rejection(acc, "nanw-2")).toEqual(["poison"]);
    for (const r of rollouts.filter((r) => r.id !== "nanw-2")) expect(acc.rounds.get(r.id), r.id).toEqual([1]);
    const [rejected] = await eventsOn<{ message: string }>(e.jsm, subjects(POLICY).rejected);
    expect(rejected?.message).toMatch(/adapter tensor .* is not finite/);
    expect((await readManifest(roundDir(e.workDir, POLICY, 1)))?.outcome).toBe("published");
  });

  it("one rollout with a wrong vllm_logp (valid, far from its adapter's) is rejected alone (logp_mismatch); the rest of its round passes the gate it alone would have failed", async () => {
    // the fake trainer's gap is -0.001·vllm_logp: ~0.001 for these rollouts, 0.999 for the wrong one — the round's
    // mean |gap| with it ~0.126, past gate.maxLogpGapAbs 0.1: the whole round rejected, its good rollouts consumed
    const gate = { maxLogpGapAbs: 0.1, maxRolloutLogpGapAbs: 0.5 };
    const e = await start({ gate, round: { rows: 8 } });
    const rollouts = await Promise.all(Array.from({ length: 8 }, (_, i) => makeRollout("gap", i, { steps: 1 })));
    rollouts[5]!.steps[0]!.vllm_logp = -999;
    await publishRollouts(e.js, rollouts);
    const acc = await settled(e, rollouts.map((r) => r.id));
    expect(rejection(acc, "gap-5")).toEqual(["logp_mismatch"]);
    for (const r of rollouts.filter((r) => r.id !== "gap-5")) expect(acc.rounds.get(r.id), r.id).toEqual([1]);
    const manifest = await readManifest(roundDir(e.workDir, POLICY, 1));
    expect(manifest).toMatchObject({ outcome: "published", rows: 7 });
    expect(manifest?.poisoned).toEqual([expect.objectContaining({ id: "gap-5", reason: "logp_mismatch" })]);
    const [rejected] = await eventsOn<{ reason: string; message: string; round: number }>(e.jsm, subjects(POLICY).rejected);
    expect(rejected).toMatchObject({ reason: "logp_mismatch", round: 1 });
    expect(rejected?.message).toMatch(/averages 0\.9990 over its 1 step\(s\), 0\.99\d+ above its round's median 0\.00\d+: more than gate.maxRolloutLogpGapAbs 0\.5/);
    const isolated = (await eventsOn<{ type: string; poisoned: Array<{ id: string; reason: string }> }>(e.jsm, subjects(POLICY).rounds)).filter((r) => r.type === "round.isolated");
    expect(isolated.map((r) => r.poisoned)).toEqual([[expect.objectContaining({ id: "gap-5", reason: "logp_mismatch" })]]);
    const scrape = await (await fetch(`http://127.0.0.1:${daemon!.metricsPort}/metrics`)).text();
    expect(scrape).toContain('rlloop_rollouts_rejected_total{reason="logp_mismatch"} 1');
    expect(scrape).toContain('rlloop_rollouts_rejected_total{reason="poison"} 0');

    // a sampler that disagrees as a whole (half the round or more) singles out no rollout: the round's gate judges
    const wrong = await Promise.all(Array.from({ length: 8 }, (_, i) => makeRollout("allgap", i, { steps: 1 })));
    for (const r of wrong.slice(0, 4)) r.steps[0]!.vllm_logp = -999;
    await publishRollouts(e.js, wrong);
    const after = await settled(e, wrong.map((r) => r.id));
    for (const r of wrong) expect(rejection(after, r.id), r.id).toBeUndefined();
    expect(await readManifest(roundDir(e.workDir, POLICY, 2))).toMatchObject({ outcome: "rejected", rows: 8, poisoned: [] });
  });

  it("a round whose rollouts are all poison commits empty: nothing trained, every one rejected, the loop goes on", async () => {
    const e = await start({ trainer: { env: { FAKE_TRAINER_POISON: "target-poison" } } });
    const bad = await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map(async (i) => {
      const r = await makeRollout("allbad", i, { steps: 1 });
      r.steps[0]!.name = "target-poison";
      return r;
    }));
    await publishRollouts(e.js, bad);
    await settled(e, bad.map((r) => r.id));
    const goods = await Promise.all(Array.from({ length: 8 }, (_, i) => makeRollout("after", i, { steps: 1 })));
    await publishRollouts(e.js, goods);
    const acc = await settled(e, [...bad, ...goods].map((r) => r.id));
    for (const r of bad) expect(rejection(acc, r.id)).toEqual(["poison"]);
    expect(acc.emptyRounds).toEqual([1]);
    for (const r of goods) expect(acc.rounds.get(r.id)).toEqual([2]);
  });

  it("a trainer broken for a while rejects nothing: degraded with the cause, the round trains once the trainer works", async () => {
    const { e, file: broken, rollouts, degraded } = await roundOnBrokenTrainer("FAKE_TRAINER_FAIL_WHILE", "broken");
    expect(degraded.health.cause).toContain("neither can the probe");
    expect(degraded.phase).toBe("waiting");
    // intake stops beyond the open round: the next round's rollouts wait on the stream, unrejected
    const next = await Promise.all(Array.from({ length: 8 }, (_, i) => makeRollout("waiting", i, { steps: 1 })));
    await publishRollouts(e.js, next);
    await sleep(1500);
    expect(await eventsOn(e.jsm, subjects(POLICY).rejected)).toEqual([]);
    rmSync(broken);
    const acc = await settled(e, [...rollouts, ...next].map((r) => r.id));
    expect(acc.rejections.size).toBe(0);
    expect(rollouts.map((r) => acc.rounds.get(r.id))).toEqual(rollouts.map(() => [1]));
    const healthy = (await e.nc.request(subjects(POLICY).status, "", { timeout: 2000 })).json<StatsEvent>();
    expect(healthy.health).toEqual({ status: "ok", cause: null, since: null });
    const failures = (await eventsOn<{ type: string; fault: string }>(e.jsm, subjects(POLICY).rounds)).filter((r) => r.type === "round.attempt_failed");
    // blamed on the trainer while it was broken; an attempt that failed just before the repair may see the probe
    // train and count as suspect rows, which costs one more try, never a rejection
    expect(failures[0]?.fault).toBe("trainer");
  });

  it("a host that computes garbage (NaN statistics, the probe's too) consumes nothing: degraded, the round trains once it is fixed, across a restart", async () => {
    const { e, file: garbage, config, rollouts, degraded } = await roundOnBrokenTrainer("FAKE_TRAINER_NAN_WHILE", "garbage");
    expect(degraded.health.cause).toContain("pg_loss is not finite");
    // stopped while it waits, the host fixed, started again: the garbage attempt is not taken as the round's
    await daemon!.stop();
    rmSync(garbage);
    daemon = new Daemon({ config: parseConfig(e.config({ ...quiet, ...config })) });
    await daemon.start();
    const acc = await settled(e, rollouts.map((r) => r.id));
    expect(acc.rejections.size).toBe(0);
    expect(rollouts.map((r) => acc.rounds.get(r.id))).toEqual(rollouts.map(() => [1]));
    expect((await readManifest(roundDir(e.workDir, POLICY, 1)))?.outcome).toBe("published");
  });

  it("a trainer that writes torn adapters (the probe's too) consumes nothing: degraded, and the adapter published once it is fixed is whole", async () => {
    const { e, file: torn, rollouts, degraded } = await roundOnBrokenTrainer("FAKE_TRAINER_TORN_WHILE", "torn");
    expect(degraded.health.cause).toMatch(/neither can the probe: .*not a whole safetensors file/);
    rmSync(torn);
    const acc = await settled(e, rollouts.map((r) => r.id));
    expect(acc.rejections.size).toBe(0);
    expect(rollouts.map((r) => acc.rounds.get(r.id))).toEqual(rollouts.map(() => [1]));
    const manifest = await readManifest(roundDir(e.workDir, POLICY, 1));
    expect(manifest?.outcome).toBe("published");
    expect(await checkAdapterFiles(join(roundDir(e.workDir, POLICY, 1), "adapter"))).toBeNull();
  });

  it("a round resumed after its rollouts left the stream (stream.maxAgeS, a trainer fault longer than it) commits from what its folder kept", async () => {
    const { e, file: broken, config: cfg, rollouts } = await roundOnBrokenTrainer("FAKE_TRAINER_FAIL_WHILE", "aged");
    await daemon!.stop();
    await e.jsm.streams.purge(ROLLOUT_STREAM); // what max_age does to messages older than it, acked or not
    rmSync(broken);
    daemon = new Daemon({ config: parseConfig(e.config({ ...quiet, ...cfg })) });
    await daemon.start();
    const manifest = await waitFor("round 1 committed", async () => {
      const m = await readManifest(roundDir(e.workDir, POLICY, 1));
      return m?.status === "committed" ? m : null;
    });
    expect([manifest.outcome, manifest.events.map((ev) => ev.id)]).toEqual(["published", rollouts.map((r) => r.id)]);
    expect(await eventsOn(e.jsm, subjects(POLICY).rejected)).toEqual([]);
  });

  it("a daemon killed again and again while it trains rejects no rollout; the round trains when it is let finish", async () => {
    const e = (env = await startLoopEnv());
    const file = e.writeConfig({ trainer: { env: { FAKE_TRAINER_SLEEP_MS: "1500" } }, log: { level: "info" } });
    const rollouts = await Promise.all(Array.from({ length: 8 }, (_, i) => makeRollout("killed", i, { steps: 1 })));
    await publishRollouts(e.js, rollouts);
    // each kill lands while the trainer runs; the next start ends the trainer the killed daemon left behind
    // (marked-processes.ts) unless it finished first, and then commits its output (finished-attempt.ts): the kills
    // stop there
    let kills = 0;
    for (; kills < 4; kills++) {
      const d = spawnDaemon(file);
      await d.waitForLog("daemon started", (l) => l.msg === "daemon started");
      const status = await waitFor("round 1 training", async () => {
        const manifest = await readManifest(roundDir(e.workDir, POLICY, 1));
        return manifest?.status === "training" || manifest?.status === "committed" ? manifest.status : null;
      });
      d.child.kill("SIGKILL");
      await d.exited;
      if (status === "committed") break;
    }
    expect(kills).toBeGreaterThanOrEqual(0);
    const last = spawnDaemon(file);
    try {
      const acc = await settled(e, rollouts.map((r) => r.id));
      expect(acc.rejections.size).toBe(0);
      expect(rollouts.map((r) => acc.rounds.get(r.id))).toEqual(rollouts.map(() => [1]));
      const manifest = await readManifest(roundDir(e.workDir, POLICY, 1));
      // a start resumes the last attempt's finished output, or trains one attempt more; none of them fails the round
      console.info(`figure: daemon killed ${kills} time(s) while training: round 1 committed after ${manifest?.attempts} attempt(s), 0 rejections`);
    } finally {
      last.child.kill("SIGTERM");
      await last.exited;
    }
  });

  it("a round left pending, resumed under a stricter config, trains with every rollout it was assembled from; only new rollouts meet the new bounds", async () => {
    const rollouts = await Promise.all(Array.from({ length: 8 }, (_, i) => makeRollout("stricter", i, { steps: 2, reward: 0.9 })));
    const e = (env = await startLoopEnv());
    await publishRollouts(e.js, rollouts);
    const first = spawnDaemon(e.writeConfig({ round: { rows: 16 }, trainer: { env: { FAKE_TRAINER_SLEEP_MS: "3000" } }, log: { level: "info" } }));
    await waitFor("round 1 training", async () => ((await readManifest(roundDir(e.workDir, POLICY, 1)))?.status === "training" ? true : null));
    first.child.kill("SIGKILL"); // the round stays pending for the next start
    await first.exited;
    // rewards above 0.5 and 2 steps were fine when the round was assembled; they are not any more
    const stricter: ConfigInput = { round: { rows: 16 }, limits: { reward: { min: 0, max: 0.5 } }, policy: { maxSteps: 1 } };
    daemon = new Daemon({ config: parseConfig(e.config({ ...quiet, ...stricter })) });
    await daemon.start();
    const late = await makeRollout("stricter-late", 0, { steps: 2, reward: 0.9 });
    await publishRollouts(e.js, [late]);
    const acc = await settled(e, [...rollouts, late].map((r) => r.id));
    expect(rollouts.map((r) => acc.rounds.get(r.id))).toEqual(rollouts.map(() => [1]));
    expect(rejection(acc, late.id)).toEqual(["too_many_steps"]);
    expect((await readManifest(roundDir(e.workDir, POLICY, 1)))?.outcome).toBe("published");
  });

  it("a second daemon on the same work dir refuses at once, naming the first, and touches nothing", async () => {
    const e = await start({ round: { rows: 100 } });
    const rollouts = await Promise.all([0, 1].map((i) => makeRollout("second", i, { steps: 2 })));
    await publishRollouts(e.js, rollouts);
    const incoming = incomingDir(e.workDir, POLICY);
    await waitFor("frames buffered in incoming/", () => (existsSync(incoming) && readdirSync(incoming).length === 4 ? true : null));
    const run = await execa(process.execPath, cliArgs("daemon", "--config", e.writeConfig(quiet)), { cwd: REPO, reject: false });
    expect(run.exitCode).not.toBe(0);
    expect(run.stderr).toContain(`work dir ${e.workDir} is in use by the daemon with pid ${process.pid}`);
    expect(readdirSync(incomingDir(e.workDir, POLICY)).length).toBe(4);
    expect(daemon!.snapshot().buffered_rollouts).toBe(2);
  });

  it("a misconfigured start exits non-zero within seconds with the reason, and leaves the stream untouched", async () => {
    const e = (env = await startLoopEnv());
    await publishRollouts(e.js, [await makeRollout("untouched", 0)]);
    const cases: Array<[string, ConfigInput, RegExp]> = [
      ["adapter.initial pointing nowhere", { adapter: { initial: join(e.dir, "nowhere") } }, /adapter\.initial .*nowhere: no such folder/],
      ["a trainer command that does not exist", { trainer: { command: [join(e.dir, "no-such-trainer")] } }, /trainer\.command .*no-such-trainer.*not an executable file/],
      ["a model folder that does not exist", { trainer: { command: null, model: join(e.dir, "no-model") } }, /trainer\.model .*no-model: no such folder/],
      ["a trainer that cannot train the probe", { trainer: { env: { FAKE_TRAINER_FAIL_WHILE: e.dir } } }, /cannot train the probe job[\s\S]*broken while/],
      ["a frames root that is not there (unmounted)", { frames: { roots: [join(e.dir, "unmounted")] } }, /'frames\.roots' names .*unmounted, which is not a directory/],
      ["a mismatch gate without the statistics it reads", { trainer: { command: null, model: e.dir }, gate: { maxMismatchKl: 0.1 } }, /'gate\.maxMismatchKl' needs 'trainer\.mismatchStats': true/],
    ];
    for (const [what, overrides, reason] of cases) {
      const started = Date.now();
      const run = await execa(process.execPath, cliArgs("daemon", "--config", e.writeConfig({ ...quiet, ...overrides })), { cwd: REPO, reject: false, timeout: 60_000 });
      expect(run.exitCode, what).not.toBe(0);
      expect(run.stderr, what).toMatch(reason);
      console.info(`figure: misconfigured start (${what}): exit ${run.exitCode} after ${((Date.now() - started) / 1000).toFixed(1)} s`);
    }
    // no consumer was created, nothing was delivered; no lock is left behind
    expect(await e.jsm.consumers.info(ROLLOUT_STREAM, consumerName(POLICY)).catch(() => null)).toBeNull();
    expect(existsSync(join(e.workDir, "daemon.lock"))).toBe(false);
  });

  it("a late duplicate many rounds later, across a restart, is rejected duplicate_id (the id memory is by time, in KV)", async () => {
    const e = await start({ intake: { dedupRounds: 1 }, round: { rows: 2, maxWaitS: null, minRows: 1 }, offPolicy: { maxStaleness: 100 } });
    const first = await makeRollout("late", 0, { steps: 2 });
    await publishRollouts(e.js, [first]);
    await settled(e, ["late-0"]);
    for (let round = 2; round <= 5; round++) await publishRollouts(e.js, [await makeRollout(`fill${round}`, 0, { steps: 2 })]);
    await settled(e, ["late-0", "fill2-0", "fill3-0", "fill4-0", "fill5-0"]);
    await daemon!.stop();
    daemon = new Daemon({ config: parseConfig(e.config({ ...quiet, intake: { dedupRounds: 1 }, round: { rows: 2, maxWaitS: null, minRows: 1 }, offPolicy: { maxStaleness: 100 } })) });
    await daemon.start();
    // the same rollout under a new message id (the stream's duplicate window does not drop it): a new stream sequence
    const seq = (await e.js.publish(subjects(POLICY).rollouts, JSON.stringify(first), { msgID: "late-0-again" })).seq;
    const acc = await settled(e, ["fill2-0"]);
    expect(rejection(acc, "late-0")).toEqual(["duplicate_id"]);
    expect(acc.rounds.get("late-0")).toEqual([1]);
    const events = await eventsOn<{ seq: number; message: string }>(e.jsm, subjects(POLICY).rejected);
    expect(events.find((r) => r.seq === seq)?.message).toContain("within intake.duplicateWindowS");
  });
  it("committed rollouts redelivered from long ago (a consumer re-created from an old floor) are acked, not trained again nor judged by today's config", async () => {
    const cfg: ConfigInput = { intake: { dedupRounds: 1 }, round: { rows: 2, maxWaitS: null, minRows: 1 }, offPolicy: { maxStaleness: 100 } };
    const e = await start(cfg);
    const rollouts = await Promise.all([1, 2, 3, 4].map((r) => makeRollout(`old${r}`, 0, { steps: 2 })));
    for (const r of rollouts) await publishRollouts(e.js, [r]);
    const before = await settled(e, rollouts.map((r) => r.id));
    await daemon!.stop();
    // the consumer gone and re-created from the stream's start: every committed message is delivered again, and the
    // daemon's memory of committed sequences holds the last round only (dedupRounds 1)
    await e.jsm.consumers.delete(ROLLOUT_STREAM, consumerName(POLICY));
    // and the configuration is tighter now: by it each of these trained rollouts is stale (maxStaleness 1 by default,
    // their adapter up to 4 behind) and has too many steps (2)
    const config = parseConfig(e.config({ ...quiet, ...cfg, offPolicy: {}, policy: { maxSteps: 1 } }));
    await new Intake(e.js, e.jsm, { policy: POLICY, consumer: config.consumer, round: config.round, startSeq: () => 1 }, pino({ level: "silent" })).ensureConsumer();
    daemon = new Daemon({ config });
    await daemon.start();
    await waitFor("every old message acked", async () => {
      const info = await e.jsm.consumers.info(ROLLOUT_STREAM, consumerName(POLICY));
      return info.num_ack_pending === 0 && info.num_pending === 0 && info.delivered.stream_seq >= 4 ? true : null;
    });
    const acc = await accounting(e);
    expect(rollouts.map((r) => acc.rounds.get(r.id))).toEqual(rollouts.map((r) => before.rounds.get(r.id)));
    expect(rollouts.every((r) => acc.rounds.get(r.id)?.length === 1)).toBe(true);
    expect(acc.rejections.size).toBe(0);
  });
});

describe("loop - own-server mode and status when NATS is down", () => {
  it("a start that fails in own-server mode stops the nats-server it started", async () => {
    const env = await startLoopEnv();
    try {
      const workDir = join(env.dir, "own");
      mkdirSync(workDir, { recursive: true });
      const file = env.writeConfig({ ...quiet, workDir, nats: { url: null }, adapter: { initial: join(env.dir, "nowhere-else") } });
      const run = await execa(process.execPath, cliArgs("daemon", "--config", file), { cwd: REPO, reject: false, timeout: 60_000 });
      expect(run.exitCode).not.toBe(0);
      // the adapter check runs before the server starts; a failure after it (a probe) must stop it too
      const probeFile = env.writeConfig({ ...quiet, workDir, nats: { url: null }, trainer: { env: { FAKE_TRAINER_FAIL_WHILE: env.dir } } });
      const probed = await execa(process.execPath, cliArgs("daemon", "--config", probeFile), { cwd: REPO, reject: false, timeout: 60_000 });
      expect(probed.stderr).toMatch(/cannot train the probe job/);
      expect(existsSync(join(workDir, "nats", "server.json"))).toBe(false);
    } finally {
      await env.close();
    }
  });

  it("a stop() while the daemon waits for a NATS server that is not up ends the start cleanly, at once", async () => {
    const env = await startLoopEnv();
    try {
      const workDir = join(env.dir, "waiting");
      mkdirSync(workDir, { recursive: true });
      const daemon = new Daemon({ config: parseConfig(env.config({ ...quiet, workDir, nats: { url: "nats://127.0.0.1:1" } })) });
      const starting = daemon.start();
      await sleep(1500); // most likely in the wait between two attempts (0.5 s doubling); a stop before it ends it too
      await daemon.stop();
      await expect(starting).resolves.toBeUndefined();
    } finally {
      await env.close();
    }
  });

  it("rlloop status honours --timeout when NATS is unreachable", async () => {
    const dir = mkdtempSync(join(tmpdir(), "rlloop-status-"));
    const file = join(dir, "config.json");
    writeFileSync(file, JSON.stringify({ workDir: join(dir, "work"), nats: { url: "nats://127.0.0.1:1" } }));
    const run = await execa(process.execPath, cliArgs("status", "--config", file, "--timeout-s", "0.5"), { cwd: REPO, reject: false, timeout: 30_000 });
    expect(run.exitCode).not.toBe(0);
    expect(run.stderr).toContain("cannot reach NATS at nats://127.0.0.1:1 within 500 ms");
  });
});
