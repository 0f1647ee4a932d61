// A standby daemon for the same policy "on another host": its own work dir and its own copy of the initial adapter;
// the active daemon's disk is deleted with it, so the standby can continue only from what NATS holds (the state record,
// the adapter and optimizer state of the last committed round, the reference adapter, the committed manifests). Both
// run as child processes with the test-double trainer against a real nats-server.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { afterEach, describe, expect, it } from "vitest";
import { Kvm } from "@nats-io/kv";
import { Objm } from "@nats-io/obj";
import { ADAPTER_BUCKET, IDS_BUCKET, ROLLOUT_STREAM, consumerName, subjects, type AdapterPublished } from "../src/contract/index.js";
import { fetchFolder } from "../src/loop/continuation.js";
import { readManifest } from "../src/loop/manifest.js";
import { roundDir } from "../src/loop/paths.js";
import { StateStore } from "../src/loop/state.js";
import {
  FAKE_TRAINER, POLICY, REPO, accounting, cliArgs, eventsOn, makeRollout, misaccounted, publishRollouts, spawnDaemon, startLoopEnv, waitFor,
  type DaemonProcess, type LoopEnv,
} from "./helpers/loop.js";

const TTL_S = 3;

describe("loop - a standby daemon takes over from the state kept in NATS", () => {
  let env: LoopEnv | null = null;
  const daemons: DaemonProcess[] = [];
  afterEach(async () => {
    for (const d of daemons.splice(0)) {
      d.child.kill("SIGCONT");
      d.child.kill("SIGKILL");
      await d.exited;
    }
    await env?.close();
    env = null;
  });

  /** A "host": a work dir and an initial adapter of its own; the config as every test daemon's, with a short lease. */
  function host(e: LoopEnv, name: string, overrides: Parameters<LoopEnv["writeConfig"]>[0] = {}) {
    const root = join(e.dir, name);
    const initial = join(root, "sft-adapter");
    mkdirSync(root, { recursive: true });
    execFileSync(process.execPath, [FAKE_TRAINER, "init", initial]);
    const workDir = join(root, "work");
    const config = e.writeConfig({
      workDir, adapter: { initial }, round: { rows: 8, maxWaitS: null, minRows: 1 }, offPolicy: { maxStaleness: 10 },
      consumer: { ackWaitS: 2, fetchBatch: 32 }, log: { level: "info" }, ...overrides, lease: { ttlS: TTL_S, ...overrides.lease },
    });
    return { root, workDir, config };
  }

  const settled = (e: LoopEnv, ids: string[], workDir: string, daemon: DaemonProcess) => waitFor("every rollout accounted for and nothing pending", async () => {
    const info = await e.jsm.consumers.info(ROLLOUT_STREAM, consumerName(POLICY)).catch(() => null);
    if (!info || info.num_ack_pending > 0 || info.num_pending > 0) return null;
    const a = await accounting(e, workDir);
    return misaccounted(a, ids).length === 0 ? a : null;
  }, 90_000).catch(async (err: Error) => {
    // what the consumer and the daemon were doing: a rare failure is then diagnosable from CI's log
    const info = await e.jsm.consumers.info(ROLLOUT_STREAM, consumerName(POLICY)).catch(() => null);
    throw new Error(`${err.message}: ${misaccounted(await accounting(e, workDir), ids).join("; ")}; consumer: pending ` +
      `${info?.num_pending}, ack pending ${info?.num_ack_pending}, redelivered ${info?.num_redelivered}; the daemon's last log lines:\n` +
      daemon.lines.slice(-40).map((l) => JSON.stringify(l)).join("\n"), { cause: err });
  });

  it("SIGKILL of the active daemon mid-round, its disk gone: the standby takes over within the lease TTL and continues from the last committed round", async () => {
    const e = (env = await startLoopEnv());
    const a = host(e, "host-a");
    // the standby's rounds also close 3 s after they open: a round that closes while its first job runs (republishing
    // round 1's adapter) takes every rollout admitted by then, more than its 8 rows when that job is slow (a loaded
    // machine), and the rollouts left over would wait for rows that never come (maxWaitS null)
    const b = host(e, "host-b", { round: { rows: 8, maxWaitS: 3, minRows: 1 } });
    const active = spawnDaemon(a.config, { RLLOOP_TEST_PAUSE_AT: "training:2" });
    daemons.push(active);
    await active.waitForLog("active started", (l) => l.msg === "daemon started");
    const standby = spawnDaemon(b.config, {}, ["--standby"]);
    daemons.push(standby);
    await standby.waitForLog("standby waiting", (l) => l.msg === "standby: waiting for the lease of the active daemon");

    const rollouts = await Promise.all(Array.from({ length: 12 }, (_, i) => makeRollout("standby", i, { steps: 2 })));
    await publishRollouts(e.js, rollouts);
    await active.waitForLog("round 2 trained, paused before its commit", (l) => l.testPause === "training");
    active.child.kill("SIGKILL");
    const killed = Date.now();
    await active.exited;
    rmSync(a.root, { recursive: true, force: true }); // the host is gone: nothing of its disk can be read

    await standby.waitForLog("lease taken over", (l) => l.msg === "lease taken over: this daemon is now the active one");
    const takeover = (Date.now() - killed) / 1000;
    await standby.waitForLog("standby's round 2 committed", (l) => l.msg === "round committed" && l.round === 2);
    const resumed = (Date.now() - killed) / 1000;
    const acc = await settled(e, rollouts.map((r) => r.id), b.workDir, standby);
    expect(misaccounted(acc, rollouts.map((r) => r.id))).toEqual([]);

    // round 2 continued round 1's adapter and optimizer state, fetched from the object store
    const round2 = await readManifest(roundDir(b.workDir, POLICY, 2));
    expect(round2?.parent.round).toBe(1);
    const record = (await (await StateStore.open(e.nc, POLICY, 1)).read())?.record;
    expect(round2?.parent.sha256).toBe(record?.recent_adapters.find((x) => x.round === 1)?.sha256);
    expect(existsSync(join(roundDir(b.workDir, POLICY, 1), "adapter", "optimizer.safetensors"))).toBe(true);
    expect(existsSync(join(b.root, "work", "adapters", POLICY, "reference", "adapter_model.safetensors"))).toBe(true);
    const adapters = await eventsOn<AdapterPublished>(e.jsm, subjects(POLICY).adapterPublished);
    const published = adapters.map((x) => x.round);
    expect(published.slice(0, 2)).toEqual([1, 2]);
    expect(published).toEqual(published.map((_, i) => i + 1)); // each round once, in order; how many: how the rollouts fell into rounds
    console.info(`figure: standby took the lease ${takeover.toFixed(1)} s after the SIGKILL (lease.ttlS ${TTL_S}), committed the redone round 2 ${resumed.toFixed(1)} s after it (consumer.ackWaitS 2)`);
    expect(takeover).toBeLessThan(TTL_S + 5);

    // a graceful stop releases the lease at once
    standby.child.kill("SIGTERM");
    expect(await standby.exited).toBe(0);
  });

  /**
   * An active daemon on host-a whose round 1 (8 rows) trains for 1.5 s, and a standby on host-b; the active one is
   * frozen (SIGSTOP) in the middle of round 1, past the lease's TTL. `beforeStandby` runs once the active one started.
   */
  async function frozenDuringRound1(tag: string, beforeStandby: (e: LoopEnv) => Promise<void> = async () => {}) {
    const e = (env = await startLoopEnv());
    const a = host(e, "host-a", { trainer: { command: [process.execPath, FAKE_TRAINER], retryMinS: 0.2, retryMaxS: 1, env: { FAKE_TRAINER_SLEEP_MS: "1500" } } });
    const b = host(e, "host-b", { lease: { standby: true } });
    const active = spawnDaemon(a.config);
    daemons.push(active);
    await active.waitForLog("active started", (l) => l.msg === "daemon started");
    await beforeStandby(e);
    const standby = spawnDaemon(b.config);
    daemons.push(standby);
    await standby.waitForLog("standby waiting", (l) => l.msg === "standby: waiting for the lease of the active daemon");
    const rollouts = await Promise.all(Array.from({ length: 4 }, (_, i) => makeRollout(tag, i, { steps: 2 })));
    await publishRollouts(e.js, rollouts);
    await active.waitForLog("round 1 training", (l) => l.msg === "round assembled" && l.round === 1);
    active.child.kill("SIGSTOP");
    return { e, b, active, standby, rollouts };
  }

  it("an active daemon that lost its lease (frozen past the TTL) stops without committing; a second daemon without --standby is refused", async () => {
    const { e, b, active, standby, rollouts } = await frozenDuringRound1("frozen", async (e) => {
      // no --standby: refused at once, naming the holder
      const refused = await execa(process.execPath, cliArgs("daemon", "--config", host(e, "host-c").config), { cwd: REPO, reject: false, timeout: 60_000 });
      expect(refused.exitCode).not.toBe(0);
      expect(refused.stderr).toContain(`policy ${POLICY} is active on`);
      expect(refused.stderr).toContain("--standby");
    });
    await standby.waitForLog("lease taken over", (l) => l.msg === "lease taken over: this daemon is now the active one");
    await standby.waitForLog("the standby's round 1 committed", (l) => l.msg === "round committed" && l.round === 1);
    active.child.kill("SIGCONT");
    expect(await active.exited).not.toBe(0);
    expect(active.lines.some((l) => l.msg === "lease lost")).toBe(true);
    expect(active.lines.some((l) => l.msg === "round committed")).toBe(false);
    // nor did it overwrite what its successor committed: the record's objects hold the bytes it names
    const record = (await (await StateStore.open(e.nc, POLICY, 1)).read())?.record;
    expect(record?.adapter.objects).toBeDefined();
    await fetchFolder(await new Objm(e.nc).open(ADAPTER_BUCKET), record!.adapter.objects!, join(e.dir, "committed-objects"));
    // nor recorded its round's ids after it lost the lease: each id's entry is the successor's, from before its commit
    const committedAt = Date.parse(String(standby.lines.find((l) => l.msg === "round committed" && l.round === 1)?.time));
    const ids = await new Kvm(e.nc).open(IDS_BUCKET);
    for (const r of rollouts) {
      const entry = await ids.get(`${POLICY}.${createHash("sha256").update(r.id).digest("hex")}`);
      expect(entry?.created.getTime(), r.id).toBeLessThanOrEqual(committedAt);
    }

    const acc = await settled(e, rollouts.map((r) => r.id), b.workDir, standby);
    expect(misaccounted(acc, rollouts.map((r) => r.id))).toEqual([]);
    expect((await eventsOn<AdapterPublished>(e.jsm, subjects(POLICY).adapterPublished)).map((x) => x.round)).toEqual([1]);
  });

  it("a daemon frozen past the TTL that wakes with the lease free again (its successor committed, then stopped) takes it back but writes nothing of its round", async () => {
    const { e, active, standby, rollouts } = await frozenDuringRound1("woken");
    await standby.waitForLog("the standby's round 1 committed", (l) => l.msg === "round committed" && l.round === 1);
    const committedAt = Date.parse(String(standby.lines.find((l) => l.msg === "round committed" && l.round === 1)?.time));
    // the successor stops: its lease released, free for the frozen daemon to take again
    standby.child.kill("SIGTERM");
    expect(await standby.exited).toBe(0);
    const stateBefore = await (await StateStore.open(e.nc, POLICY, 1)).read();
    const wokenAt = Date.now();
    active.child.kill("SIGCONT");
    expect(await active.exited).not.toBe(0);
    expect(active.lines.some((l) => l.msg === "round committed")).toBe(false);
    // its round's ids are the successor's entries, from before its commit, and the record and its objects are as the
    // successor left them
    const ids = await new Kvm(e.nc).open(IDS_BUCKET);
    for (const r of rollouts) {
      const entry = await ids.get(`${POLICY}.${createHash("sha256").update(r.id).digest("hex")}`);
      expect(entry?.created.getTime(), r.id).toBeLessThanOrEqual(committedAt);
    }
    const state = await (await StateStore.open(e.nc, POLICY, 1)).read();
    expect(state?.revision).toBe(stateBefore?.revision);
    for (const o of await (await new Objm(e.nc).open(ADAPTER_BUCKET)).list()) expect(Date.parse(o.mtime), o.name).toBeLessThan(wokenAt);
    expect(active.lines.some((l) => JSON.stringify(l.err ?? "").includes("another daemon committed meanwhile"))).toBe(true);
  });
});
