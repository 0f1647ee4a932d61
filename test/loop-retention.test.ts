// Retention (src/loop/retention.ts): a daemon that runs for weeks keeps the last `retention.rounds` committed rounds
// whole; an older one keeps its manifest, and its adapter only while the state record names it — on this disk and in
// the object store (its manifest object stays). Against a real nats-server and the test-double trainer: rounds go on
// committing, a restart picks up where the pruning stopped, and replay of a pruned round still rebuilds its
// train.jsonl, with --train refused naming the parent adapter that is gone.
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Objm } from "@nats-io/obj";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADAPTER_BUCKET, EVENT_STREAM, adapterObjectPrefix, subjects, type AdapterPublished } from "../src/contract/index.js";
import { parseConfig, type ConfigInput } from "../src/loop/config/index.js";
import { ensureStreams } from "../src/loop/connection.js";
import { Daemon } from "../src/loop/daemon.js";
import { ReplayMismatchError } from "../src/loop/errors.js";
import { readManifest } from "../src/loop/manifest.js";
import { policyDir, roundDir } from "../src/loop/paths.js";
import { replayRound } from "../src/loop/replay.js";
import { StateStore } from "../src/loop/state.js";
import { POLICY, accounting, eventsOn, makeRollout, publishRollouts, settled, startLoopEnv, waitFor, type LoopEnv } from "./helpers/loop.js";

const KEEP = 2;
// guard.baselines 1: the record names the last 3 adapters (its lineage), so some old rounds keep theirs and others not
const overrides: ConfigInput = { retention: { rounds: KEEP }, guard: { baselines: 1 }, round: { rows: 2, maxWaitS: null, minRows: 1 }, offPolicy: { maxStaleness: 100 }, log: { level: "error" } };

describe("loop - what old rounds keep, on the disk and in the object store", () => {
  let env: LoopEnv;
  let daemon: Daemon;

  beforeAll(async () => {
    env = await startLoopEnv();
  });
  afterAll(async () => {
    await daemon?.stop();
    await env?.close();
  });

  /** Commits `rounds` more rounds of one two-step rollout each. */
  async function commitRounds(tag: string, rounds: number) {
    const ids: string[] = [];
    for (let i = 0; i < rounds; i++) {
      const rollout = await makeRollout(tag, i, { steps: 2 });
      await publishRollouts(env.js, [rollout]);
      ids.push(rollout.id);
      await waitFor(`${rollout.id} committed`, async () => ((await accounting(env)).rounds.has(rollout.id) ? true : null));
    }
    return ids;
  }

  /** A round folder's entries; null where this disk has none (a host that took over has the last rounds' only). */
  const folder = (round: number) => (existsSync(roundDir(env.workDir, POLICY, round)) ? readdirSync(roundDir(env.workDir, POLICY, round)).sort() : null);

  /** What each round keeps once pruning has reached the record's round − KEEP. */
  async function expectPruned() {
    const record = (await (await StateStore.open(env.nc, POLICY, 1)).read())!.record;
    const named = new Set([record.adapter.round, ...record.lineage.map((e) => e.round)]);
    const store = await new Objm(env.nc).open(ADAPTER_BUCKET);
    const stored = async (round: number, name: string) => {
      const info = await store.info(`${adapterObjectPrefix(POLICY, round)}/${name}`);
      return info !== null && !info.deleted;
    };
    await waitFor("old rounds pruned", async () => {
      for (let round = 1; round <= record.round - KEEP; round++) {
        const entries = folder(round);
        if (entries !== null && entries.join() !== (named.has(round) ? "adapter,manifest.json" : "manifest.json")) return null;
      }
      return true;
    });
    for (let round = 1; round <= record.round; round++) {
      const whole = round > record.round - KEEP;
      if (whole) expect(folder(round), `round ${round}`).toEqual(expect.arrayContaining(["adapter", "frames", "manifest.json", "rollouts.jsonl", "train.jsonl"]));
      expect(await stored(round, "manifest.json"), `round ${round}'s manifest object`).toBe(true);
      await waitFor(`round ${round}'s adapter object ${whole || named.has(round) ? "kept" : "deleted"}`, async () => (await stored(round, "adapter_model.safetensors")) === (whole || named.has(round)) || null);
      if (named.has(round)) expect(existsSync(join(roundDir(env.workDir, POLICY, round), "adapter", "adapter_model.safetensors"))).toBe(true);
    }
    return record;
  }

  it("keeps the last retention.rounds rounds whole; older ones keep their manifest, and their adapter while the record names it", async () => {
    daemon = new Daemon({ config: parseConfig(env.config(overrides)) });
    await daemon.start();
    const ids = await commitRounds("kept", 5);
    const record = await expectPruned();
    expect(record.round).toBe(5);
    expect(record.lineage.map((e) => e.round)).toEqual([3, 4, 5]); // round 3: pruned but for its adapter
    // the rounds it keeps only as manifests still say what they trained (recovery, admission, the rounds answer)
    expect((await readManifest(roundDir(env.workDir, POLICY, 1)))?.events.map((e) => e.id)).toEqual([ids[0]]);
    expect((await daemon.rounds(10)).map((r) => r.round)).toEqual([5, 4, 3, 2, 1]);
  });

  it("a restart goes on from where pruning stopped — a cursor ahead of the record is not trusted, a round without a folder here loses its stored adapter too; a pruned round replays its train.jsonl, and --train names the parent adapter that is gone", async () => {
    await daemon.stop();
    // a work dir kept while the state was reset would leave a cursor ahead of the record; and round 4's folder is not
    // on this disk (a host that took over)
    writeFileSync(join(policyDir(env.workDir, POLICY), "retention.json"), JSON.stringify({ pruned_up_to: 1000 }));
    rmSync(roundDir(env.workDir, POLICY, 4), { recursive: true });
    daemon = new Daemon({ config: parseConfig(env.config(overrides)) });
    await daemon.start();
    const ids = await commitRounds("after", 3);
    const record = await expectPruned();
    expect(record.round).toBe(8);
    // round 3's adapter, named no more, went after the restart too
    expect(folder(3)).toEqual(["manifest.json"]);
    // up to round 5: round 6 is kept for its adapter, and looked at again after a restart
    const cursor = () => JSON.parse(readFileSync(join(policyDir(env.workDir, POLICY), "retention.json"), "utf8")) as unknown;
    await waitFor("the cursor written", () => JSON.stringify(cursor()) === JSON.stringify({ pruned_up_to: 5 }) || null);
    await settled(env, ids);

    const config = parseConfig(env.config(overrides));
    const replayed = await replayRound({ config, round: 2, out: join(env.dir, "replay-2") });
    expect(replayed.sha256).toBe((await readManifest(roundDir(env.workDir, POLICY, 2)))?.train_sha256);
    await expect(replayRound({ config, round: 2, out: join(env.dir, "replay-2-train"), train: true })).rejects.toThrow(ReplayMismatchError);
    await expect(replayRound({ config, round: 2, out: join(env.dir, "replay-2-train"), train: true })).rejects.toThrow(/parent adapter .* is not there \(on the daemon's disk an adapter is kept for the last retention.rounds rounds/);
  });

  it("objects the record names that are gone from the store (a bucket purged) are put again at the next commit", async () => {
    await daemon.stop();
    // every round's adapter refused by the gate (the fake trainer's kl is 0.001): the record keeps naming round 8's
    daemon = new Daemon({ config: parseConfig(env.config({ ...overrides, gate: { maxKl: 0.0001 } })) });
    await daemon.start();
    const states = await StateStore.open(env.nc, POLICY, 1);
    const before = (await states.read())!.record;
    const store = await new Objm(env.nc).open(ADAPTER_BUCKET);
    const named = [before.adapter.objects!, before.reference.objects!].flatMap((f) => f.files.map((file) => ({ name: `${f.prefix}/${file.name}`, sha256: file.sha256 })));
    for (const { name } of named) await store.delete(name);
    await commitRounds("refused", 1);
    const after = (await states.read())!.record;
    expect(after.round).toBe(9);
    expect(after.adapter.round).toBe(before.adapter.round);
    for (const { name, sha256 } of named) {
      const info = await store.info(name);
      expect(info !== null && !info.deleted, name).toBe(true);
      expect([...after.adapter.objects!.files, ...after.reference.objects!.files].find((f) => name.endsWith(`/${f.name}`) && f.sha256 === sha256), name).toBeDefined();
    }
  });

  it("an announcement of the adapter served that the events stream no longer holds (its age limit, no round published since) is made again at start", async () => {
    await daemon.stop();
    const subject = subjects(POLICY).adapterPublished;
    await env.jsm.streams.purge(EVENT_STREAM, { filter: subject });
    // the server forgets message ids past its duplicate window: 1 s here, as 30 days of age limit are past its 1 day
    await ensureStreams(env.jsm, parseConfig({ stream: { eventsDuplicateWindowS: 1 } }).stream);
    await sleep(3000); // the server prunes its ids on a timer of the window
    daemon = new Daemon({ config: parseConfig(env.config({ ...overrides, gate: { maxKl: 0.0001 }, stream: { eventsDuplicateWindowS: 1 } })) });
    await daemon.start();
    const served = (await (await StateStore.open(env.nc, POLICY, 1)).read())!.record;
    expect(served.round).toBeGreaterThan(served.adapter.round); // the last round's adapter was refused: round 8's is served
    const announced = await waitFor("the served adapter announced again", async () => {
      const list = await eventsOn<AdapterPublished>(env.jsm, subject);
      return list.length > 0 ? list : null;
    });
    expect(announced.map((a) => a.round)).toEqual([served.adapter.round]);
  });
});
