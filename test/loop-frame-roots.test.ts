// Frames by {path} under a root on a mount that stops answering (test/helpers/hung-mount.ts: a real FUSE mount nobody
// serves, as a network share whose server is gone). The calls into it wait in the kernel for as long as it hangs:
// the root's frames must fail as the host's fault at frames.rootTimeoutS (judged again later, never rejected), the
// event loop must not wait on them, and whatever hangs must leave half of libuv's four threads free — so that the
// other roots' frames, the other rollouts and the daemon's own file writes go on. Before, a synchronous realpath
// blocked the whole daemon on the first such frame.
import { createHash } from "node:crypto";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Kvm } from "@nats-io/kv";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { consumerName, IDS_BUCKET, ROLLOUT_STREAM, subjects, type RolloutCompletedInput } from "../src/contract/index.js";
import { parseConfig, type ConfigInput } from "../src/loop/config/index.js";
import { Daemon } from "../src/loop/daemon.js";
import { readManifest } from "../src/loop/manifest.js";
import { roundDir } from "../src/loop/paths.js";
import { HostFaultError, isTransient } from "../src/loop/errors.js";
import { FrameRoots } from "../src/loop/frame-roots.js";
import { hungMount, type HungMount } from "./helpers/hung-mount.js";
import { accounting, eventsOn, makeRollout, POLICY, publishRollouts, startLoopEnv, testFrame, waitFor, type LoopEnv } from "./helpers/loop.js";

/** Resolves with `work`, or rejects once `boundMs` has passed: only stops a test that would otherwise hang. */
async function within<T>(what: string, work: Promise<T>, boundMs = 30_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: still waiting after ${boundMs / 1000} s`)), boundMs)));
  try {
    return await Promise.race([work, bound]);
  } finally {
    clearTimeout(timer);
  }
}

describe("loop - frames under a root on a hung mount", () => {
  let dir: string;
  let good: string;
  let hung: string;
  let mount: HungMount;
  let mounts: HungMount[];
  let png: Buffer;
  /** another hung mount, closed after the test */
  const alsoHung = (name: string) => {
    const m = hungMount(join(dir, name));
    mounts.push(m);
    return join(dir, name);
  };

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "rlloop-frame-roots-"));
    good = join(dir, "good");
    mkdirSync(join(good, "cam"), { recursive: true });
    png = await testFrame();
    writeFileSync(join(good, "cam", "f.png"), png);
    hung = join(dir, "hung");
    mount = hungMount(hung);
    mounts = [mount];
  });
  afterEach(async () => {
    for (const m of mounts) m.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("its frame fails as the host's fault at the deadline, the next at once; another root's frames are read meanwhile", async () => {
    const roots = new FrameRoots([good, hung], 500);
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 10);
    const first = await within("the hung root's frame", roots.read(join(hung, "cam", "f.png"), 1 << 20).catch((e: unknown) => e));
    clearInterval(ticker);
    expect(first).toBeInstanceOf(HostFaultError);
    expect(isTransient(first)).toBe(true);
    expect((first as Error).message).toMatch(/^frames root .*\/hung has not answered a file-system call within frames.rootTimeoutS 0.5 s \(a hung mount\?\)/);
    expect(ticks).toBeGreaterThan(0); // the event loop ran while the call waited in the kernel
    const next = await roots.read("../hung/cam/g.png", 1 << 20).catch((e: unknown) => e); // relative: under the first root
    expect((next as Error).message).toBe((first as Error).message);
    expect(await roots.read("cam/f.png", 1 << 20)).toEqual(png);
    await expect(roots.isDirectory(good)).resolves.toBe(true);
    await expect(roots.isDirectory(hung)).rejects.toBeInstanceOf(HostFaultError);
  });

  it("a frame under a root configured as a link is read though another root hangs", async () => {
    const link = join(dir, "link");
    symlinkSync(good, link);
    const roots = new FrameRoots([hung, link], 500); // the frame's real path is under no root as configured
    expect(await within("the linked root's frame", roots.read(join(link, "cam", "f.png"), 1 << 20))).toEqual(png);
    expect(await roots.read(join(link, "cam", "f.png"), 1 << 20)).toEqual(png); // the hung root now known
  });

  it("holds one of libuv's four threads however many frames wait: the process's other file calls go on", async () => {
    const roots = new FrameRoots([hung, good], 600_000); // no deadline within the test: every call it makes stays in the kernel
    const reads = Array.from({ length: 8 }, (_, k) => roots.read(join(hung, `f${k}.png`), 1 << 20).catch((e: unknown) => e));
    const local = await within("reads of a local file beside eight frames of the hung root", Promise.all(Array.from({ length: 4 }, () => readFile(join(good, "cam", "f.png")))));
    expect(local.every((b) => b.equals(png))).toBe(true);
    expect(await within("a frame of the other root", roots.read(join(good, "cam", "f.png"), 1 << 20))).toEqual(png);
    // the connection ends: the call in flight fails, then those that waited for the root's slot — the host's fault, each
    mount.abort();
    const errors = await within("the hung root's frames after the abort", Promise.all(reads));
    expect(errors.map((e) => isTransient(e))).toEqual(Array(8).fill(true));
  });

  it("two hung roots hold two threads: every {path} frame then waits, the process's other file calls go on", async () => {
    const second = alsoHung("hung-2");
    const roots = new FrameRoots([good, hung, second], 500);
    const refusals = await Promise.all([hung, second].map((r) => roots.read(join(r, "f.png"), 1 << 20).catch((e: unknown) => e as Error)));
    expect(refusals.map((e) => e instanceof HostFaultError && /has not answered a file-system call/.test(e.message))).toEqual([true, true]);
    // both call slots held by overdue calls: a frame of the good root is the host's at once, without a call
    const meanwhile = roots.read(join(good, "cam", "f.png"), 1 << 20);
    await expect(meanwhile).rejects.toBeInstanceOf(HostFaultError);
    await expect(meanwhile).rejects.toThrow(/^frames roots: every file-system call slot \(2\) is held by a call past frames.rootTimeoutS 0.5 s \(hung mounts\?\)/);
    const local = await within("reads of a local file beside two hung roots", Promise.all(Array.from({ length: 4 }, () => readFile(join(good, "cam", "f.png")))));
    expect(local.every((b) => b.equals(png))).toBe(true);
    mount.abort(); // the first root's overdue call returns: its slot serves the good root again
    expect(await waitFor("the good root's frame", () => roots.read(join(good, "cam", "f.png"), 1 << 20).catch(() => null))).toEqual(png);
  });

  it("frames of a good root waiting for a slot when the second root goes overdue fail at once, not behind the hung calls", async () => {
    const second = alsoHung("hung-2");
    const roots = new FrameRoots([good, hung, second], 500);
    const hungReads = [hung, second].map((r) => roots.read(join(r, "f.png"), 1 << 20).catch((e: unknown) => e));
    // a rollout's steps are read at once: one waits for a shared slot, the others for the good root's
    const goodReads = Array.from({ length: 3 }, () => roots.read(join(good, "cam", "f.png"), 1 << 20).catch((e: unknown) => e as Error));
    const settled = await within("the good root's frames", Promise.all(goodReads));
    expect(settled.map((e) => e instanceof HostFaultError && /^frames roots: every file-system call slot/.test(e.message))).toEqual([true, true, true]);
    mount.abort();
    expect((await Promise.all(hungReads)).every((e) => e instanceof HostFaultError)).toBe(true);
    expect(await waitFor("the good root's frame", () => roots.read(join(good, "cam", "f.png"), 1 << 20).catch(() => null))).toEqual(png);
  });

  it("is read again once its overdue calls return: what it answers then decides, and whether it is failing", async () => {
    let changes = 0;
    const roots = new FrameRoots([hung], 300, () => changes++);
    const hungMessage = /has not answered a file-system call/;
    expect(roots.failing()).toEqual([]);
    await expect(roots.read(join(hung, "f.png"), 1 << 20)).rejects.toThrow(hungMessage);
    await expect(roots.read(join(hung, "f.png"), 1 << 20)).rejects.toThrow(hungMessage);
    expect(roots.failing()).toEqual([{ root: hung, cause: expect.stringMatching(hungMessage) as unknown as string }]);
    expect(changes).toBe(1);
    mount.abort(); // the overdue call returns (ENOTCONN): the next frame makes a call again
    const answered = await waitFor("a call made again", async () => {
      const err = await roots.read(join(hung, "f.png"), 1 << 20).then(() => new Error("read"), (e: unknown) => e as Error);
      return hungMessage.test(err.message) ? null : err;
    });
    // a dead mount's root is no directory now: still the host's fault, never the rollout's
    expect(answered).toBeInstanceOf(HostFaultError);
    expect(answered.message).toMatch(/^frames root .*\/hung is not a directory now \(unmounted\?\)/);
    // and at a start: a root that fails as a host does (ENOTCONN) is the host's too, not a configuration error
    await expect(roots.isDirectory(hung)).rejects.toThrow(/^frames root .*\/hung cannot be looked at now: ENOTCONN/);
    expect(roots.failing().map((f) => f.root)).toEqual([hung]);
    // unmounted, the root is a plain folder again: it answers (this frame is not there: the rollout's fault)
    mount.close();
    await expect(roots.read(join(hung, "f.png"), 1 << 20)).rejects.toMatchObject({ reason: "image_missing" });
    expect(roots.failing()).toEqual([]);
  });

  it("a failing root is looked at again on its own: seen to answer when it does, though no frame of it comes", async () => {
    const roots = new FrameRoots([hung], 300);
    try {
      await expect(roots.isDirectory(hung)).rejects.toThrow(/has not answered a file-system call/); // a hung root at start
      mount.abort();
      await waitFor("the dead mount's failure", () => (roots.failing()[0]?.cause.includes("ENOTCONN") ? true : null));
      mount.close(); // unmounted: a plain folder again
      await waitFor("the root seen to answer", () => (roots.failing().length === 0 ? true : null));
    } finally {
      roots.close();
    }
  });

  describe("in the daemon", () => {
    let env: LoopEnv | null = null;
    let daemon: Daemon | null = null;
    afterEach(async () => {
      await daemon?.stop();
      await env?.close();
      daemon = null;
      env = null;
    });

    const withFrames = (r: RolloutCompletedInput, path: string): RolloutCompletedInput => ({ ...r, steps: r.steps.map((s) => ({ ...s, image: { path } })) });

    /** A daemon on a good root (a frame at `frame`) and a second root, `share`, that answers at the start and hangs
     *  after it (a judgement of a frame there waits, far from the 120 s deadline, until the test ends the hang). */
    const startWithShareHangingAfter = async (overrides: ConfigInput) => {
      const e = (env = await startLoopEnv());
      const frame = join(e.framesRoot, "cam", "f.png");
      mkdirSync(join(e.framesRoot, "cam"), { recursive: true });
      writeFileSync(frame, png);
      const share = join(dir, "share");
      mkdirSync(share);
      const level = (process.env.TEST_LOG_LEVEL ?? "fatal") as "fatal";
      const started = (daemon = new Daemon({ config: parseConfig(e.config({ ...overrides, frames: { roots: [e.framesRoot, share], rootTimeoutS: 120 }, log: { level } })) }));
      await started.start();
      alsoHung("share");
      return { e, frame, share, started };
    };

    it("starts, trains the rollouts whose frames it can read, says degraded, and trains the others once the root answers", async () => {
      const e = (env = await startLoopEnv());
      const frame = join(e.framesRoot, "cam", "f.png");
      mkdirSync(join(e.framesRoot, "cam"), { recursive: true });
      writeFileSync(frame, png);
      daemon = new Daemon({ config: parseConfig(e.config({ frames: { roots: [e.framesRoot, hung], rootTimeoutS: 2 }, round: { rows: 8, maxWaitS: 1, minRows: 1 }, log: { level: (process.env.TEST_LOG_LEVEL ?? "fatal") as "fatal" } })) });
      await within("the start (a root that does not answer is checked with a deadline)", daemon.start());
      const stuck = await Promise.all([0, 1].map(async (i) => withFrames(await makeRollout("on-hung", i, { steps: 2 }), join(hung, "cam", `${i}.png`))));
      const fine = await Promise.all([0, 1, 2, 3].map(async (i) => withFrames(await makeRollout("on-good", i, { steps: 2 }), frame)));
      await publishRollouts(e.js, [stuck[0]!, ...fine.slice(0, 2), stuck[1]!, ...fine.slice(2)]);
      const acc = await waitFor("round 1 committed", async () => {
        const a = await accounting(e);
        return fine.every((r) => a.rounds.has(r.id)) ? a : null;
      });
      expect(fine.map((r) => acc.rounds.get(r.id))).toEqual([[1], [1], [1], [1]]);
      expect(stuck.map((r) => acc.rounds.get(r.id) ?? null)).toEqual([null, null]);
      expect([...acc.rejections.keys()]).toEqual([]);
      expect(daemon.snapshot().round).toBe(1);
      // the operator sees why those rollouts wait, and how many do (unanchored: on a machine loaded enough to keep
      // one of the good root's calls past the deadline, its cause would come first)
      expect(await (await fetch(`http://127.0.0.1:${daemon.metricsPort}/metrics`)).text()).toContain("rlloop_rollouts_waiting 2");
      const health = daemon.snapshot().health;
      expect(health.status).toBe("degraded");
      expect(health.cause).toMatch(/frames root \S*\/hung has not answered a file-system call within frames.rootTimeoutS 2 s \(a hung mount\?\)/);
      // the share comes back, with the frames: the rollouts that waited train in the next round, and health is ok
      mount.close();
      mkdirSync(join(hung, "cam"), { recursive: true });
      for (const i of [0, 1]) writeFileSync(join(hung, "cam", `${i}.png`), png);
      const after = await waitFor("the waiting rollouts trained", async () => {
        const a = await accounting(e);
        return stuck.every((r) => a.rounds.has(r.id)) ? a : null;
      }, 180_000); // their next delivery: the redelivery backoff doubles from 5 s with each judgement that failed
      expect(stuck.map((r) => after.rounds.get(r.id))).toEqual([[2], [2]]);
      expect([...after.rejections.keys()]).toEqual([]);
      expect(daemon.snapshot().health).toEqual({ status: "ok", cause: null, since: null });
      expect(await (await fetch(`http://127.0.0.1:${daemon.metricsPort}/metrics`)).text()).toContain("rlloop_rollouts_waiting 0");
    });

    it("a copy of a rollout judged while another copy of its id waits on a hung root waits for that judgement, not rejected as a duplicate", async () => {
      const { e, frame, share } = await startWithShareHangingAfter({ round: { rows: 2, maxWaitS: 1, minRows: 1 } });
      const rollout = await makeRollout("twin", 0, { steps: 2 });
      // the first copy's frames are on the share: its judgement waits there, far from its deadline
      const onHung = (await e.js.publish(subjects(POLICY).rollouts, JSON.stringify(withFrames(rollout, join(share, "cam", "f.png"))), { msgID: "twin-hung" })).seq;
      const good = (await e.js.publish(subjects(POLICY).rollouts, JSON.stringify(withFrames(rollout, frame)), { msgID: "twin-good" })).seq;
      await waitFor("the good copy judged once", async () => ((await e.jsm.consumers.info(ROLLOUT_STREAM, consumerName(POLICY))).delivered.stream_seq >= good ? true : null));
      await new Promise((resolve) => setTimeout(resolve, 1000));
      expect(await eventsOn(e.jsm, subjects(POLICY).rejected)).toEqual([]);
      // the share's connection ends: the first copy's read fails, the host's fault (it waits); the good copy, judged
      // again, trains
      mounts.at(-1)!.abort();
      const trained = await waitFor("the good copy trained", async () => ((await accounting(e)).rounds.get(rollout.id) ? await readManifest(roundDir(e.workDir, POLICY, 1)) : null), 60_000);
      expect(trained?.events.map((ev) => ev.seq)).toEqual([good]);
      // the first copy, judged again (its root now fails at once), finds its id trained: a duplicate
      const rejected = await waitFor("the other copy rejected", async () => {
        const list = await eventsOn<{ seq: number; reason: string }>(e.jsm, subjects(POLICY).rejected);
        return list.length > 0 ? list : null;
      }, 120_000);
      expect(rejected.map((r) => [r.seq, r.reason])).toEqual([[onHung, "duplicate_id"]]);
    });

    // the rounds the daemon keeps in memory (intake.dedupRounds) answer for round 1, or its committed manifest does
    it.each([
      { where: "in memory", dedupRounds: 64, rounds: 1 },
      { where: "in its manifest", dedupRounds: 1, rounds: 2 },
    ])("a rollout whose id a dead daemon recorded for a round its successor committed without it is trained, not acked as committed (that round $where)", async ({ dedupRounds, rounds }) => {
      const { e, frame, share, started } = await startWithShareHangingAfter({ round: { rows: 4, maxWaitS: 1, minRows: 1 }, intake: { dedupRounds } });
      // its judgement waits on the share while the round after it commits
      const late = await makeRollout("late", 0, { steps: 2 });
      const lateSeq = (await e.js.publish(subjects(POLICY).rollouts, JSON.stringify(withFrames(late, join(share, "cam", "f.png"))), { msgID: late.id })).seq;
      // as a daemon that died between recording round 1's ids and committing it would have left them
      const ids = await new Kvm(e.nc).open(IDS_BUCKET);
      await ids.put(`${POLICY}.${createHash("sha256").update(late.id).digest("hex")}`, `${lateSeq} 1`);
      for (let round = 1; round <= rounds; round++) {
        const others = await Promise.all([0, 1].map(async (i) => withFrames(await makeRollout(`others-${round}`, i, { steps: 2 }), frame)));
        await publishRollouts(e.js, others);
        await waitFor(`round ${round} committed without it`, async () => ((await accounting(e)).rounds.has(others[1]!.id) ? true : null));
      }
      expect(started.snapshot().round).toBe(rounds);
      // the share comes back: judged again, the rollout is below the record's last sequence with its id naming round
      // 1, which did not train it
      mounts.at(-1)!.close();
      mkdirSync(join(share, "cam"), { recursive: true });
      writeFileSync(join(share, "cam", "f.png"), png);
      const after = await waitFor("the late rollout trained", async () => {
        const a = await accounting(e);
        return a.rounds.has(late.id) ? a : null;
      }, 120_000);
      expect(after.rounds.get(late.id)).toEqual([rounds + 1]);
      expect([...after.rejections.keys()]).toEqual([]);
    });
  });
});
