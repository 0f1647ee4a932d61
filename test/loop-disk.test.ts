// The work directory's disk filling up under a running daemon (a real tmpfs of a few MiB, filled until the kernel
// says ENOSPC): the host's fault, never a rollout's. The daemon stays up, says `degraded` naming the disk, rejects
// nothing, and once space is back trains every rollout exactly once; a stop while it waits is a clean stop
// (docs/daemon.md "Faults"). Needs root to mount.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { RolloutCompleted, subjects, type AdapterPublished, type PpoStats, type StatsEvent } from "../src/contract/index.js";
import { assembleRound, TRAIN_FILE } from "../src/loop/assemble.js";
import { parseConfig, type ConfigInput } from "../src/loop/config/index.js";
import { Daemon } from "../src/loop/daemon.js";
import { readManifest } from "../src/loop/manifest.js";
import { diskRoom, trainingOutputBytes } from "../src/loop/disk-room.js";
import { removeJobOutput } from "../src/loop/round-job.js";
import { Probe } from "../src/loop/probe.js";
import type { RoundTrainer } from "../src/loop/trainer.js";
import { frameFileName, roundDir } from "../src/loop/paths.js";
import { setPauseHook } from "../src/loop/test-hooks.js";
import { POLICY, eventsOn, makeRollout, publishRollouts, settled, startLoopEnv, testFrame, waitFor, type LoopEnv } from "./helpers/loop.js";
import { writeSafetensors } from "./helpers/safetensors.js";
import { smallDisk, type SmallDisk } from "./helpers/small-disk.js";

describe("loop - a full work disk", () => {
  let env: LoopEnv | null = null;
  let daemon: Daemon | null = null;
  let disk: SmallDisk | null = null;
  let fatal: Error | null = null;

  afterEach(async () => {
    setPauseHook(null);
    await daemon?.stop();
    disk?.close();
    await env?.close();
    daemon = null;
    disk = null;
    env = null;
    fatal = null;
  });

  /** A daemon whose work dir is a 16 MiB tmpfs; its fatal error, should it end on one, is kept in `fatal`. */
  async function start(overrides: ConfigInput = {}) {
    const e = (env = await startLoopEnv());
    disk = smallDisk(e.workDir, 16);
    const config = e.config({ log: { level: (process.env.TEST_LOG_LEVEL ?? "fatal") as "fatal" }, trainer: { env: { FAKE_TRAINER_FILL_DISK: disk.ballast }, retryMinS: 0.2, retryMaxS: 0.5 }, ...overrides });
    daemon = new Daemon({ config: parseConfig(config) });
    await daemon.start();
    void daemon.closed.then((err) => (fatal = err));
    return { e, d: disk };
  }

  const status = async (e: LoopEnv) => (await e.nc.request(subjects(POLICY).status, "", { timeout: 2000 })).json<StatsEvent>();

  /** Waits until the daemon is degraded with a cause matching `cause`; fails at once should the daemon end. */
  const degradedBy = (e: LoopEnv, cause: RegExp) => waitFor(`degraded: ${cause}`, async () => {
    if (fatal) throw fatal;
    const stats = await status(e);
    return stats.health.status === "degraded" && cause.test(stats.health.cause ?? "") ? stats : null;
  });

  /** Every rollout trained once, none rejected, one adapter announced per round, healthy, the daemon up. */
  async function expectAllTrained(e: LoopEnv, ids: string[], rounds: number[]) {
    const acc = await settled(e, ids);
    expect([...acc.rejections]).toEqual([]);
    expect(ids.map((id) => acc.rounds.get(id)?.length)).toEqual(ids.map(() => 1));
    const announced = await waitFor("every round announced", async () => {
      const list = await eventsOn<AdapterPublished>(e.jsm, subjects(POLICY).adapters);
      return list.length === rounds.length ? list : null;
    });
    expect(announced.map((a) => a.round)).toEqual(rounds);
    await waitFor("healthy again", async () => ((await status(e)).health.status === "ok" ? true : null));
    expect(fatal).toBeNull();
  }

  it("full right after a training: the round commits, its manifest and the next rollouts wait for space; nothing is lost or rejected", async () => {
    const { e, d } = await start();
    writeFileSync(`${d.ballast}.after`, "");
    const first = await Promise.all(Array.from({ length: 4 }, (_, i) => makeRollout("after-train", i, { steps: 2 })));
    await publishRollouts(e.js, first);
    // round 1 trained and committed; the disk refuses its manifest's update (retried), then the next rollouts' frames
    await waitFor("round 1 committed", async () => (daemon!.snapshot().round >= 1 ? true : null));
    const second = await Promise.all(Array.from({ length: 4 }, (_, i) => makeRollout("while-full", i, { steps: 2 })));
    await publishRollouts(e.js, second);
    const degraded = await degradedBy(e, /no space left on device/i);
    expect(degraded.round).toBe(1);
    expect(await eventsOn(e.jsm, subjects(POLICY).rejected)).toEqual([]);
    d.free();
    await expectAllTrained(e, [...first, ...second].map((r) => r.id), [1, 2]);
    expect((await readManifest(roundDir(e.workDir, POLICY, 1)))?.status).toBe("committed");
  });

  /** A daemon and a round of 4 two-step rollouts whose training fills the disk (the test double fills it first): the
   *  trainer cannot write its output, the probe finds no room, then the daemon's own next write fails: the round
   *  waits. Returns once the daemon says so. */
  async function roundWaitingForTheDisk(tag: string) {
    const { e, d } = await start();
    writeFileSync(`${d.ballast}.before`, "");
    const rollouts = await Promise.all(Array.from({ length: 4 }, (_, i) => makeRollout(tag, i, { steps: 2 })));
    await publishRollouts(e.js, rollouts);
    await degradedBy(e, /the work directory's disk fails round 1/);
    return { e, d, rollouts };
  }

  it("full while the trainer runs: the round waits, degraded, and is taken up again from its folder once space is back", async () => {
    const { e, d, rollouts } = await roundWaitingForTheDisk("during-train");
    expect(await eventsOn(e.jsm, subjects(POLICY).rejected)).toEqual([]);
    d.free();
    await expectAllTrained(e, rollouts.map((r) => r.id), [1]);
    const failed = (await eventsOn<{ type: string; fault?: string }>(e.jsm, subjects(POLICY).rounds)).filter((ev) => ev.type === "round.attempt_failed");
    expect(failed.length).toBeGreaterThan(0);
    expect(failed.map((f) => f.fault)).toEqual(failed.map(() => "trainer"));
  });

  it("a stop while the round waits for the disk ends at once, cleanly; the next start, with space back, commits the round once", async () => {
    const { e, d, rollouts } = await roundWaitingForTheDisk("stop-while-full");
    const stopping = daemon!;
    await stopping.stop();
    expect(await stopping.closed).toBeNull(); // a stop, not a failure
    expect((await readManifest(roundDir(e.workDir, POLICY, 1)))?.status).not.toBe("committed");
    d.free();
    daemon = new Daemon({ config: parseConfig(e.config({ log: { level: (process.env.TEST_LOG_LEVEL ?? "fatal") as "fatal" }, trainer: { retryMinS: 0.2, retryMaxS: 0.5 } })) });
    await daemon.start();
    await expectAllTrained(e, rollouts.map((r) => r.id), [1]);
  });

  it("full as a round is assembled (frames moved, manifest not written): assembled again in the same folder once space is back", async () => {
    const { e, d } = await start();
    setPauseHook((phase, round) => {
      if (phase === "assembling" && round === 1) d.fill();
    });
    const rollouts = await Promise.all(Array.from({ length: 4 }, (_, i) => makeRollout("assembling", i, { steps: 2 })));
    await publishRollouts(e.js, rollouts);
    await degradedBy(e, /the work directory's disk fails round 1/);
    expect(readdirSync(join(roundDir(e.workDir, POLICY, 1), "frames"))).toHaveLength(8); // moved, nowhere else now
    expect(await readManifest(roundDir(e.workDir, POLICY, 1))).toBeNull();
    setPauseHook(null);
    d.free();
    await expectAllTrained(e, rollouts.map((r) => r.id), [1]);
  });

  /** A daemon started on the test's small disk, full (or with `room` bytes left): its start() is still pending
   *  after a few retries — it waits for the disk, it does not fail. */
  async function startWaitingForTheDisk(room = 0, overrides: ConfigInput = {}) {
    const e = (env = await startLoopEnv());
    const d = (disk = smallDisk(e.workDir, 16));
    if (room > 0) d.leave(room);
    else d.fill();
    daemon = new Daemon({ config: parseConfig(e.config({ log: { level: (process.env.TEST_LOG_LEVEL ?? "fatal") as "fatal" }, trainer: { retryMinS: 0.2, retryMaxS: 0.5 }, ...overrides })) });
    const outcome: { started: boolean; err: unknown } = { started: false, err: null };
    const started = daemon.start().then(() => (outcome.started = true), (err: unknown) => (outcome.err = err));
    await sleep(2500); // the retries' backoff: 0.5 s, 1 s, 2 s
    expect(outcome).toEqual({ started: false, err: null });
    return { e, d, started, outcome };
  }

  it("full when the daemon starts: the start waits for space instead of failing, then trains what came meanwhile; nothing rejected", async () => {
    const { e, d, started, outcome } = await startWaitingForTheDisk();
    const rollouts = await Promise.all(Array.from({ length: 4 }, (_, i) => makeRollout("start-full", i, { steps: 2 })));
    await publishRollouts(e.js, rollouts);
    d.free();
    await started;
    expect(outcome).toEqual({ started: true, err: null });
    void daemon!.closed.then((err) => (fatal = err));
    await expectAllTrained(e, rollouts.map((r) => r.id), [1]);
  });

  it("room for the lock but not for the start's other files: the start waits the same way, its lock taken once", async () => {
    const { e, d, started, outcome } = await startWaitingForTheDisk(16 << 10);
    d.free();
    await started;
    expect(outcome).toEqual({ started: true, err: null });
    void daemon!.closed.then((err) => (fatal = err));
    const rollouts = await Promise.all(Array.from({ length: 4 }, (_, i) => makeRollout("start-room", i, { steps: 2 })));
    await publishRollouts(e.js, rollouts);
    await expectAllTrained(e, rollouts.map((r) => r.id), [1]);
    expect(readdirSync(e.workDir).filter((n) => n.startsWith("daemon.lock"))).toEqual(["daemon.lock"]);
  });

  it("a fault not the disk's after a wait for it still ends the start at once, with its reason and nothing left held", async () => {
    const { e, d, started, outcome } = await startWaitingForTheDisk();
    rmSync(e.initialAdapter, { recursive: true }); // the configuration's adapter gone: the next attempt's check fails
    d.free();
    await started;
    expect(outcome.started).toBe(false);
    expect((outcome.err as Error).name).toBe("ConfigError");
    expect((outcome.err as Error).message).toMatch(/adapter/);
    expect(readdirSync(e.workDir).filter((n) => n.startsWith("daemon.lock"))).toEqual([]); // the lock let go
    daemon = null;
  });

  it("its own nats-server (nats.url null) on a full disk: the start waits, then starts the server and the daemon", async () => {
    // room for the lock, not for the server: its start is what waits
    const { e, d, started, outcome } = await startWaitingForTheDisk(16 << 10, { nats: { url: null } });
    expect(existsSync(join(e.workDir, "nats", "server.json"))).toBe(false); // no server spawned meanwhile
    d.free();
    await started;
    expect(outcome).toEqual({ started: true, err: null });
    expect(daemon!.natsUrl).toMatch(/^nats:\/\//);
    const info = JSON.parse(readFileSync(join(e.workDir, "nats", "server.json"), "utf8")) as { pid: number };
    await daemon!.stop();
    expect(await daemon!.closed).toBeNull();
    expect(() => process.kill(info.pid, 0)).toThrow(); // stopped with the daemon
    daemon = null;
  });

  it("a stop while the start waits for the disk is a clean stop that leaves no lock behind", async () => {
    const { e, started, outcome } = await startWaitingForTheDisk();
    const stopping = daemon!;
    await stopping.stop();
    await started;
    expect(outcome).toEqual({ started: true, err: null }); // start() returns: a stop, not a failure
    expect(await stopping.closed).toBeNull();
    expect(readdirSync(e.workDir)).toEqual(["ballast"]);
    daemon = null;
  });

  it("the probe's files, refused by a full disk the first time it runs, are written on its next run once space is back", async () => {
    const e = (env = await startLoopEnv());
    const d = (disk = smallDisk(e.workDir, 16));
    const jobs: string[] = [];
    const trainer: RoundTrainer = {
      start: async () => {},
      close: async () => {},
      train: async (job) => {
        jobs.push(job.data);
        return { pg_loss: 0, kl: 0, clip_frac: 0, logp_gap: 0, logp_gap_abs: 0, rows: 2, train_s: 0 } as PpoStats;
      },
    };
    const probe = new Probe(trainer, parseConfig(e.config()));
    d.fill();
    await expect(probe.run("a", "r")).rejects.toMatchObject({ code: "ENOSPC" });
    d.free();
    expect(await probe.run("a", "r")).toEqual({ ok: true });
    expect(readdirSync(probe.dir).sort()).toEqual(["frame.png", "train.jsonl"]);
    expect(jobs).toHaveLength(1);
  });

  it("a round that fails while the disk lacks room for a training's output blames none of its rollouts; with room back, only its poison one is", async () => {
    const { e, d } = await start({ trainer: { env: { FAKE_TRAINER_POISON: "target-poison" }, retryMinS: 0.2, retryMaxS: 0.5 } });
    d.leave(2 << 20); // the test double's outputs fit; a training's output from its adapter needs 4 MiB and more
    const rollouts = await Promise.all(Array.from({ length: 4 }, (_, i) => makeRollout("no-room", i, { steps: 2 })));
    rollouts[2]!.steps[0]!.name = "target-poison";
    await publishRollouts(e.js, rollouts);
    await degradedBy(e, /neither can the probe: the work directory's disk has [0-9.]+ MiB free/);
    expect(await eventsOn(e.jsm, subjects(POLICY).rejected)).toEqual([]);
    d.free();
    const acc = await settled(e, rollouts.map((r) => r.id));
    expect([...acc.rejections]).toEqual([["no-room-2", ["poison"]]]);
    expect(rollouts.filter((_, i) => i !== 2).map((r) => acc.rounds.get(r.id))).toEqual([[1], [1], [1]]);
  });

  it("a job's output is removed with what the trainer was still writing beside it, and nothing of another attempt", async () => {
    const e = (env = await startLoopEnv());
    const dir = join(e.dir, "round");
    const out = join(dir, "adapter.tmp-7-1");
    for (const d of [out, `${out}.tmp-8-1`, `${out}.writing`, join(dir, "adapter.tmp-7-10"), join(dir, "adapter.tmp-7-10.tmp-8-2")]) mkdirSync(d, { recursive: true });
    writeFileSync(join(`${out}.tmp-8-1`, "adapter_model.safetensors"), Buffer.alloc(1024)); // the native save's part
    await removeJobOutput(out);
    expect(readdirSync(dir).sort()).toEqual(["adapter.tmp-7-10", "adapter.tmp-7-10.tmp-8-2"]);
    await removeJobOutput(join(dir, "never-written")); // nothing there: nothing to do
  });

  it("the disk's room for a training's output: three float32 copies of the parent's values and 4 MiB, free and writable", async () => {
    const e = (env = await startLoopEnv());
    const d = (disk = smallDisk(e.workDir, 16));
    // a bf16 parent of 2^19 values (1 MiB): its training writes float32 weights and two float32 moments, 6 MiB, + 4 MiB
    const parent = join(e.dir, "bf16-adapter");
    mkdirSync(parent);
    await writeSafetensors(join(parent, "adapter_model.safetensors"), new Map([["lora_A.weight", { dtype: "BF16" as const, shape: [512, 1024], data: new Float32Array(1 << 19) }]]));
    const bytes = await trainingOutputBytes(parent);
    expect(bytes).toBe((1 << 19) * 12 + (4 << 20));
    expect(await trainingOutputBytes(null)).toBe(4 << 20);
    expect(await trainingOutputBytes(join(e.dir, "no-such-adapter"))).toBe(4 << 20);
    expect(await diskRoom(e.workDir, bytes)).toBeNull();
    writeFileSync(d.ballast, Buffer.alloc(8 << 20)); // 8 MiB left: a small job would fit, this training's output not
    expect(await diskRoom(e.workDir, bytes)).toMatch(/^the work directory's disk has [0-9.]+ MiB free; a training's output needs up to 10\.0 MiB$/);
    d.free();
    expect(spawnSync("mount", ["-o", "remount,ro", e.workDir]).status).toBe(0); // room enough, but no write taken
    expect(await diskRoom(e.workDir, bytes)).toMatch(/refuses a write: EROFS/);
    expect(spawnSync("mount", ["-o", "remount,rw", e.workDir]).status).toBe(0);
    expect(await diskRoom(e.workDir, bytes)).toBeNull();
    expect(readdirSync(e.workDir)).toEqual([]);
  });

  it("an assembly the disk stopped part way is done again in the same folder: every frame moved is kept, nothing half-written stays", async () => {
    const e = (env = await startLoopEnv());
    const d = (disk = smallDisk(e.workDir, 4));
    const incoming = join(e.workDir, "incoming");
    const dir = join(e.workDir, "round");
    mkdirSync(incoming, { recursive: true });
    const png = await testFrame();
    const items = await Promise.all(Array.from({ length: 6 }, async (_, i) => ({ seq: i + 1, rollout: await makeRollout("assemble", i, { steps: 2 }) })));
    for (const { seq } of items) for (const k of [0, 1]) writeFileSync(join(incoming, frameFileName(seq, k)), png);
    const input = {
      round: 1, policy: POLICY, dir, incoming, items: items.map(({ seq, rollout }) => ({ seq, rollout: RolloutCompleted.parse(rollout) })),
      trigger: "rows" as const, advantage: parseConfig({}).advantage, parent: { round: 0, path: null, sha256: null },
      reference: { path: null, sha256: null }, configHash: "x", seed: 1,
    };
    d.fill();
    const err = await assembleRound(input).catch((x: NodeJS.ErrnoException) => x);
    expect((err as NodeJS.ErrnoException).code).toBe("ENOSPC");
    expect(readdirSync(join(dir, "frames"))).toHaveLength(12); // moved before the disk refused train.jsonl
    expect(readdirSync(dir).filter((n) => n.includes(".tmp-"))).toEqual([]);
    d.free();
    const manifest = await assembleRound(input);
    expect(manifest.rows).toBe(12);
    expect(readdirSync(join(dir, "frames")).sort()).toEqual(items.flatMap(({ seq }) => [0, 1].map((k) => frameFileName(seq, k))).sort());
    expect(readdirSync(incoming)).toEqual([]);
    expect(existsSync(join(dir, TRAIN_FILE))).toBe(true);
    expect(readdirSync(dir).filter((n) => n.includes(".tmp-"))).toEqual([]);
  });
});
