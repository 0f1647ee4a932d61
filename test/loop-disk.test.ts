// The work directory's disk filling up under a running daemon (a real tmpfs of a few MiB, filled until the kernel
// says ENOSPC): the host's fault, never a rollout's. The daemon stays up, says `degraded` naming the disk, rejects
// nothing, and once space is back trains every rollout exactly once (docs/daemon.md "Faults"). Needs root to mount.
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { RolloutCompleted, subjects, type AdapterPublished, type PpoStats, type StatsEvent } from "../src/contract/index.js";
import { assembleRound, TRAIN_FILE } from "../src/loop/assemble.js";
import { parseConfig, type ConfigInput } from "../src/loop/config/index.js";
import { Daemon } from "../src/loop/daemon.js";
import { readManifest } from "../src/loop/manifest.js";
import { Probe } from "../src/loop/probe.js";
import type { RoundTrainer } from "../src/loop/trainer.js";
import { frameFileName, roundDir } from "../src/loop/paths.js";
import { setPauseHook } from "../src/loop/test-hooks.js";
import { POLICY, eventsOn, makeRollout, publishRollouts, settled, startLoopEnv, testFrame, waitFor, type LoopEnv } from "./helpers/loop.js";
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

  it("full while the trainer runs: the round waits, degraded, and is taken up again from its folder once space is back", async () => {
    const { e, d } = await start();
    writeFileSync(`${d.ballast}.before`, "");
    const rollouts = await Promise.all(Array.from({ length: 4 }, (_, i) => makeRollout("during-train", i, { steps: 2 })));
    await publishRollouts(e.js, rollouts);
    // the trainer cannot write its output, nor can the probe; then the daemon's own next write fails: the round waits
    await degradedBy(e, /the work directory's disk fails round 1/);
    expect(await eventsOn(e.jsm, subjects(POLICY).rejected)).toEqual([]);
    d.free();
    await expectAllTrained(e, rollouts.map((r) => r.id), [1]);
    const failed = (await eventsOn<{ type: string; fault?: string }>(e.jsm, subjects(POLICY).rounds)).filter((ev) => ev.type === "round.attempt_failed");
    expect(failed.length).toBeGreaterThan(0);
    expect(failed.map((f) => f.fault)).toEqual(failed.map(() => "trainer"));
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

  it("the probe fails, naming the disk, while the work directory lacks room for a training's output, even where its own small job would fit", async () => {
    const e = (env = await startLoopEnv());
    const d = (disk = smallDisk(e.workDir, 16));
    const trainer: RoundTrainer = {
      start: async () => {},
      close: async () => {},
      train: async () => ({ pg_loss: 0, kl: 0, clip_frac: 0, logp_gap: 0, logp_gap_abs: 0, rows: 2, train_s: 0 }) as PpoStats,
    };
    // a parent adapter of 2 MiB of weights: a training from it writes up to 5 x 2 + 4 = 14 MiB
    const adapter = join(e.dir, "big-adapter");
    mkdirSync(adapter);
    writeFileSync(join(adapter, "adapter_model.safetensors"), Buffer.alloc(2 << 20));
    const probe = new Probe(trainer, parseConfig(e.config()));
    expect(await probe.run(adapter, adapter)).toEqual({ ok: true });
    writeFileSync(d.ballast, Buffer.alloc(4 << 20)); // 12 MiB left: the stub's job would fit, a real output not
    expect(await probe.run(adapter, adapter)).toMatchObject({ ok: false, error: expect.stringMatching(/MiB free; a training's output needs up to 14\.0 MiB/) });
    d.free();
    expect(await probe.run(adapter, adapter)).toEqual({ ok: true });
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
