// The web UI's reading of a loop from a real nats-server (hand-written events of the wire contract, as the daemon,
// the reloader and rollout workers publish them) and its HTTP/SSE server. The browser suite (ui-browser) runs the
// same against a real daemon.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/nats-core";
import { connect } from "@nats-io/transport-node";
import { jetstream, jetstreamManager, type JetStreamClient } from "@nats-io/jetstream";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  STATE_BUCKET, eventSubject, stateKey, statsReplacer, subjects, type AdapterRolledBack, type GuardEvidence, type PpoStats, type RoundSummary,
  type StateRecord, type StatsEvent,
} from "../src/contract/index.js";
import { ConfigSchema } from "../src/loop/config/index.js";
import { ensureStreams } from "../src/loop/connection.js";
import { startService } from "../src/loop/service.js";
import { loadUiAssets, type UiAsset } from "../src/tools/ui/assets.js";
import { buildUi } from "../src/tools/ui/build.js";
import type { UiPatch, UiSnapshot } from "../src/tools/ui/model.js";
import { decodeView } from "../src/tools/ui/view-codec.js";
import { mountUi } from "../src/tools/ui/mount.js";
import { startUiServer, type UiServer } from "../src/tools/ui/server.js";
import { startUiSource, type UiSource } from "../src/tools/ui/source.js";
import type { UiStore } from "../src/tools/ui/store.js";
import { startNatsServer, type NatsServer } from "./helpers/nats.js";
import { setTimeout as sleep } from "node:timers/promises";

/** The service's rollback endpoint, for a source that has none to do. */
const refuseRollback = async (): Promise<never> => {
  throw new Error("this test's service does no rollbacks");
};

const P = "bt";
const SHA = (n: number) => n.toString(16).padStart(2, "0").repeat(32);
const at = (s: number) => new Date(Date.UTC(2026, 11, 3, 10, 0, 0) + s * 1000).toISOString();
const ppo = (round: number, over: Partial<PpoStats> = {}): PpoStats => ({
  pg_loss: -0.01 * round, kl: 0.001 * round, clip_frac: 0.02, logp_gap: 0.003, logp_gap_abs: 0.004, rows: 64, train_s: 2 + round / 10, ...over,
});

async function publishEvent(js: JetStreamClient, event: { type: string }): Promise<void> {
  await js.publish(eventSubject(P, event.type), JSON.stringify(event, statsReplacer));
}

/** Round `round`'s lifecycle as the daemon publishes it: published, or refused by the gate. */
async function publishRound(js: JetStreamClient, round: number, outcome: "published" | "rejected", stats = ppo(round)): Promise<void> {
  const base = { policy: P, round };
  const t = round * 10;
  await publishEvent(js, { type: "round.closed", ...base, at: at(t), trigger: "rows", rows: 64, rollouts: 16 } as never);
  await publishEvent(js, { type: "round.assembled", ...base, at: at(t), rows: 64, sha256: SHA(round), dir: `/r/${round}` } as never);
  await publishEvent(js, { type: "round.training", ...base, at: at(t + 1), attempt: 1 } as never);
  await publishEvent(js, { type: "round.trained", ...base, at: at(t + 3), stats } as never);
  if (outcome === "rejected") await publishEvent(js, { type: "round.rejected", ...base, at: at(t + 3), reason: "kl 9 > gate.maxKl 1", stats } as never);
  await publishEvent(js, { type: "round.committed", ...base, at: at(t + 4), outcome, revision: round + 1 } as never);
  if (outcome === "published") {
    await publishEvent(js, { type: "round.published", ...base, at: at(t + 5), name: `${P}-r${round}` } as never);
    await publishEvent(js, {
      type: "adapter.published", ...base, name: `${P}-r${round}`, path: `/a/${round}`, object: `${P}/r${round}`, bucket: "rlloop-adapters",
      sha256: SHA(round), files: [], stats, at: at(t + 5),
    } as never);
  }
}

const EVIDENCE: GuardEvidence = {
  test: "paired", alpha: 0.05, min_effect: 0.05, candidate: { round: 38, count: 96, mean: 0.25, bound: 0.31 },
  baseline: { round: 36, count: 192, mean: 0.85, bound: 0.8 }, pairs: 40, difference_upper: -0.49,
};

/** A rollback's announcement as the daemon publishes it (src/loop/rollback.ts): from r`from` to r`to`. */
function rolledBack(seq: number, from: number, to: number, over: Partial<AdapterRolledBack> = {}): AdapterRolledBack {
  return {
    type: "adapter.rolled_back", policy: P, seq, trigger: "manual", round: to, name: `${P}-r${to}`, object: `${P}/r${to}`, bucket: "rlloop-adapters",
    sha256: SHA(to), files: [], from: { round: from, name: `${P}-r${from}` }, regressed: null, reason: `rollback ${seq}`, evidence: null,
    committed_round: from, at: at(1000 + seq), ...over,
  };
}

/** The state record the daemon commits (version 2), serving `adapter`, with its last rollback. */
function stateRecord(round: number, adapter: number, rollback: StateRecord["rollback"] = null): StateRecord {
  return {
    version: 2, policy: P, round, outcome: "published", adapter: { round: adapter, path: `/a/${adapter}`, sha256: SHA(adapter) },
    reference: { path: "/ref", sha256: null }, last_seq: 1, ack_floor: 1, recent_adapters: [], unpublished: [],
    outcomes: { range: null, adapters: [] }, lineage: [0, 1, 2, 3].map((r) => ({ round: r, parent: r === 0 ? null : r - 1, path: `/a/${r}`, sha256: SHA(r) })),
    rollback, at: at(round * 10),
  };
}

async function until(store: UiStore, ok: (s: UiSnapshot) => boolean): Promise<UiSnapshot> {
  for (;;) {
    const snap = store.snapshot();
    if (ok(snap)) return snap;
    await sleep(50);
  }
}

describe("ui - source, against a real nats-server", () => {
  let server: NatsServer;
  let nc: NatsConnection;
  let js: JetStreamClient;
  let source: UiSource;
  // a build of its own: the browser suite, maybe running beside this one, rebuilds dist/ui
  const built = mkdtempSync(join(tmpdir(), "rlloop-ui-build-"));
  let assets: Map<string, UiAsset>;

  beforeAll(async () => {
    await buildUi(built);
    assets = loadUiAssets(built);
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    js = jetstream(nc);
    await ensureStreams(await jetstreamManager(nc), ConfigSchema.parse({}).stream);
    for (let round = 1; round <= 40; round++) await publishRound(js, round, round === 7 ? "rejected" : "published", round === 7 ? ppo(7, { kl: Number.NaN }) : ppo(round));
    await publishEvent(js, { type: "round.attempt_failed", policy: P, round: 41, at: at(411), attempt: 1, fault: "trainer", error: "exit 1" } as never);
    await publishEvent(js, { type: "rollout.rejected", policy: P, seq: 3, id: "x-3", reason: "stale_adapter", message: "served by r1, 3 behind", at: at(100) } as never);
    await publishEvent(js, { type: "replica.loaded", policy: P, replica: "http://gpu1:8000", name: `${P}-r40`, at: at(406) } as never);
    // the guard's rollback found in round 40's commit; the same seq again (a re-publish: the first stands); one naming
    // rounds this history never had; another policy's; and one that does not parse
    await publishEvent(js, rolledBack(1, 39, 36, { trigger: "guard", regressed: 38, evidence: EVIDENCE, committed_round: 40, reason: "the guard: r38 worse than r36" }));
    await publishEvent(js, rolledBack(1, 40, 3, { reason: "the same seq again" }));
    await publishEvent(js, rolledBack(2, 500, 77, { committed_round: 900 }));
    await js.publish(eventSubject("other", "adapter.rolled_back"), JSON.stringify({ ...rolledBack(3, 40, 39), policy: "other" }));
    await js.publish(eventSubject(P, "adapter.rolled_back"), JSON.stringify({ ...rolledBack(4, 40, 39), seq: "four" }));
    // another policy's events and messages that are not events at all are skipped
    await js.publish(eventSubject("other", "round.closed"), JSON.stringify({ type: "round.closed", policy: "other", round: 1, at: at(0), trigger: "rows", rows: 1, rollouts: 1 }));
    await js.publish(eventSubject(P, "round.closed"), "{not json");
    await js.publish(eventSubject(P, "round.closed"), JSON.stringify({ type: "round.closed", policy: P, round: "one" }));
    for (let i = 0; i < 30; i++) {
      await js.publish(subjects(P).rollouts, JSON.stringify({ id: `w-${i}`, policy: P, adapter: { round: i % 3, name: "x" }, reward: i % 3 + (i % 5) / 10, steps: [] }));
    }
    source = await startUiSource(nc, { policy: P, source: server.url, requestTimeoutMs: 300, rewardHistory: 20, flushMs: 20 });
    await source.caughtUp;
  });

  afterAll(async () => {
    await source?.stop();
    await nc?.close();
    await server?.stop();
    rmSync(built, { recursive: true, force: true });
  });

  test("source - reads the stored history of every stream, then says it caught up", () => {
    const snap = source.store.snapshot();
    expect(snap.caughtUp).toBe(true);
    expect(snap.rounds.map((r) => r.round)).toEqual(Array.from({ length: 41 }, (_, i) => i + 1));
    expect(snap.rounds[0]).toMatchObject({ status: "published", outcome: "published", trigger: "rows", rows: 64, rollouts: 16, attempts: 1, pg_loss: -0.01, latency_s: 5 });
    expect(snap.rounds[6]).toMatchObject({ round: 7, status: "rejected", outcome: "rejected", note: "kl 9 > gate.maxKl 1", latency_s: 4 });
    expect(snap.rounds[6]?.kl).toBeNaN();
    expect(snap.rounds[40]).toMatchObject({ round: 41, status: "attempt 1 failed", note: "trainer: exit 1", pg_loss: null });
    expect(snap.adapters).toHaveLength(40);
    expect(snap.adapters[6]).toEqual({ round: 7, name: null, sha256: null, verdict: "refused", reason: "kl 9 > gate.maxKl 1", atMs: Date.parse(at(73)) });
    expect(snap.adapters[39]).toMatchObject({ round: 40, name: "bt-r40", sha256: SHA(40), verdict: "passed" });
    expect(snap.reasons).toEqual([{ reason: "stale_adapter", count: 1, lastAtMs: Date.parse(at(100)), lastMessage: "served by r1, 3 behind" }]);
    expect(snap.replicas).toEqual([{ replica: "http://gpu1:8000", loads: [{ name: "bt-r40", status: "loaded", reason: null, atMs: Date.parse(at(406)) }] }]);
    expect(snap.rollbacks).toEqual([
      {
        seq: 1, trigger: "guard", fromRound: 39, regressedRound: 38, toRound: 36, toName: "bt-r36", toSha256: SHA(36), committedRound: 40,
        reason: "the guard: r38 worse than r36", atMs: Date.parse(at(1001)),
        evidence: { test: "paired", alpha: 0.05, minEffect: 0.05, candidate: EVIDENCE.candidate, baseline: EVIDENCE.baseline, pairs: 40, differenceUpper: -0.49 },
      },
      expect.objectContaining({ seq: 2, fromRound: 500, toRound: 77, committedRound: 900, evidence: null }),
    ]);
    // a rollback adds no adapter, and no round, that the loop's history does not have
    expect(snap.adapters.map((a) => a.round)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    // the newest 20 of 30 rollouts: i = 10..29
    const expected = new Map<number, number[]>();
    for (let i = 10; i < 30; i++) expected.set(i % 3, [...(expected.get(i % 3) ?? []), i % 3 + (i % 5) / 10]);
    expect(snap.rewards.map((r) => [r.adapterRound, r.count])).toEqual([...expected].sort(([a], [b]) => a - b).map(([round, v]) => [round, v.length]));
    for (const r of snap.rewards) expect(r.mean).toBeCloseTo((expected.get(r.adapterRound) ?? []).reduce((a, b) => a + b, 0) / r.count, 12);
    expect(snap.live.notice).toMatch(/no answer from rlloop\.bt\.svc\.status/);
  });

  test("source - follows live events, stats with the daemon's health, and the state record", async () => {
    await publishRound(js, 42, "published");
    await js.publish(subjects(P).rollouts, JSON.stringify({ id: "w-new", policy: P, adapter: { round: 41, name: "x" }, reward: 0.75, steps: [] }));
    const stats: StatsEvent = {
      type: "stats", policy: P, at: at(500), phase: "waiting", health: { status: "degraded", cause: "trainer host unreachable", since: at(490) },
      round: 42, open_round: 43, training_round: null, buffered_rows: 12, buffered_rollouts: 3, rows_per_s: 1.5, pending_acks: 3, rejected: 1,
      last: null, gpu_memory_bytes: 2 ** 30, uptime_s: 60,
    };
    nc.publish(subjects(P).stats, JSON.stringify(stats));
    const kv = await new Kvm(nc).create(STATE_BUCKET);
    await kv.put(stateKey(P), JSON.stringify({
      version: 2, policy: P, round: 42, outcome: "published", adapter: { round: 42, path: "/a/42", sha256: SHA(42) }, reference: { path: "/ref", sha256: null },
      last_seq: 1, ack_floor: 1, recent_adapters: [], at: at(500),
    }));
    const snap = await until(source.store, (s) => s.rounds.at(-1)?.status === "published" && s.rounds.at(-1)?.round === 42 && s.live.servingAdapter !== null
      && s.live.phase === "waiting" && s.rewards.some((r) => r.adapterRound === 41));
    expect(snap.live).toMatchObject({
      phase: "waiting", health: { status: "degraded", cause: "trainer host unreachable", sinceMs: Date.parse(at(490)) }, committedRound: 42, openRound: 43,
      bufferedRows: 12, pendingAcks: 3, rejectedSinceStart: 1, gpuMemoryBytes: 2 ** 30, notice: null, connected: true,
      servingAdapter: { round: 42, sha256: SHA(42) },
    });
    expect(snap.rewards.find((r) => r.adapterRound === 41)).toMatchObject({ count: 1, mean: 0.75 });
  });

  test("source - a monitor started after the rollbacks reads them from the stream, and from the state record's revisions", async () => {
    const fresh = await startNatsServer();
    const nc2 = await connect({ servers: fresh.url });
    try {
      await ensureStreams(await jetstreamManager(nc2), ConfigSchema.parse({}).stream);
      const js2 = jetstream(nc2);
      for (const round of [1, 2, 3, 4, 5]) await publishRound(js2, round, "published");
      // #1, the guard's in round 5's commit, only in an older revision of the state record (its announcement older
      // than the events stream keeps); #2, an operator's after it, announced and in the newest revision
      const manual = rolledBack(2, 5, 1, { committed_round: 5, reason: "announced" });
      await js2.publish(eventSubject(P, manual.type), JSON.stringify(manual));
      const kv = await new Kvm(nc2).create(STATE_BUCKET, { history: 8 });
      const fromRecord = (seq: number, trigger: "guard" | "manual", from: number, to: number, reason: string) => ({
        seq, trigger, from, to, regressed: trigger === "guard" ? 3 : null, reason, evidence: trigger === "guard" ? EVIDENCE : null, round: 5, at: at(1000 + seq),
      });
      await kv.put(stateKey(P), JSON.stringify(stateRecord(4, 4)));
      await kv.put(stateKey(P), JSON.stringify(stateRecord(5, 5, fromRecord(1, "guard", 4, 2, "r3 worse than r2"))));
      await kv.put(stateKey(P), JSON.stringify(stateRecord(5, 1, fromRecord(2, "manual", 5, 1, "as the record says"))));
      const src = await startUiSource(nc2, { policy: P, source: fresh.url, requestTimeoutMs: 200 });
      const snap = await until(src.store, (s) => s.caughtUp && s.rollbacks.length === 2 && s.rollbacks[1]?.reason === "announced" && s.live.servingAdapter?.round === 1);
      expect(snap.rollbacks.map((r) => [r.seq, r.trigger, r.fromRound, r.toRound, r.committedRound, r.reason])).toEqual([
        [1, "guard", 4, 2, 5, "r3 worse than r2"], [2, "manual", 5, 1, 5, "announced"],
      ]);
      // what the record alone tells: the target's weights from its lineage, and the guard's evidence
      expect(snap.rollbacks[0]).toMatchObject({ toName: "bt-r2", toSha256: SHA(2), regressedRound: 3, evidence: { test: "paired", differenceUpper: -0.49 } });
      expect(snap.live.servingAdapter).toEqual({ round: 1, name: "bt-r1", sha256: SHA(1) });
      await src.stop();
    } finally {
      await nc2.close();
      await fresh.stop();
    }
  });

  test("source - rounds the events stream no longer holds come from the daemon's summaries", async () => {
    const summaries: RoundSummary[] = [{ round: 1, status: "committed:published", rows: 1, rollouts: 1, sha256: SHA(1), stats: ppo(1, { kl: 99 }) }];
    const fresh = await startNatsServer();
    const nc2 = await connect({ servers: fresh.url });
    try {
      await ensureStreams(await jetstreamManager(nc2), ConfigSchema.parse({}).stream);
      await publishRound(jetstream(nc2), 2, "published");
      const stats = { ...liveStats(), round: 2 };
      const service = await startService(nc2, P, { snapshot: () => stats, rounds: async () => [...summaries, { ...summaries[0], round: 2, stats: ppo(2, { kl: 77 }) } as RoundSummary], rollback: refuseRollback }, pino({ level: "silent" }));
      const src = await startUiSource(nc2, { policy: P, source: fresh.url, requestTimeoutMs: 2000 });
      await src.caughtUp;
      const snap = src.store.snapshot();
      expect(snap.rounds.map((r) => [r.round, r.status, r.kl])).toEqual([[1, "published", 99], [2, "published", ppo(2).kl]]);
      expect(snap.live).toMatchObject({ phase: "intake", committedRound: 2, notice: null });
      await src.stop();
      await service.stop();
    } finally {
      await nc2.close();
      await fresh.stop();
    }
  });

  test("source - a stop() before its readers are set up stops them too: none is left subscribed (a monitor's Ctrl-C right after start)", async () => {
    const fresh = await startNatsServer();
    const nc2 = await connect({ servers: fresh.url, name: "ui-stopped-early" });
    /** The connection's subscriptions as the server has them, less the request inbox every connection keeps. */
    const subscriptions = async () => {
      await nc2.flush();
      const connz = (await (await fetch(`${fresh.monitorUrl()}/connz?subs=1`)).json()) as { connections: Array<{ name?: string; subscriptions_list?: string[] }> };
      const mine = connz.connections.find((c) => c.name === "ui-stopped-early");
      return (mine?.subscriptions_list ?? []).filter((s) => !s.endsWith(".*"));
    };
    try {
      await ensureStreams(await jetstreamManager(nc2), ConfigSchema.parse({}).stream);
      for (const round of [1, 2]) await publishRound(jetstream(nc2), round, "published");
      const kv = await new Kvm(nc2).create(STATE_BUCKET, { history: 8 });
      await kv.put(stateKey(P), JSON.stringify(stateRecord(2, 2)));
      for (let i = 0; i < 5; i++) {
        const src = await startUiSource(nc2, { policy: P, source: fresh.url, requestTimeoutMs: 200 });
        await src.stop();
        expect(await subscriptions()).toEqual([]);
        // a reader whose set-up was already in flight finishes it later, and is stopped then
        await sleep(300);
        expect(await subscriptions()).toEqual([]);
      }
      await nc2.drain();
    } finally {
      await nc2.close();
      await fresh.stop();
    }
  });

  test("source - waits for a loop whose streams do not exist yet", async () => {
    const fresh = await startNatsServer();
    const nc2 = await connect({ servers: fresh.url });
    try {
      const src = await startUiSource(nc2, { policy: P, source: fresh.url, requestTimeoutMs: 200 });
      expect(src.store.snapshot().caughtUp).toBe(false);
      await ensureStreams(await jetstreamManager(nc2), ConfigSchema.parse({}).stream);
      await publishRound(jetstream(nc2), 1, "published");
      await src.caughtUp;
      await until(src.store, (s) => s.rounds[0]?.status === "published");
      await src.stop("stopped by the test");
      expect(src.store.snapshot().live).toMatchObject({ connected: false, notice: "stopped by the test" });
    } finally {
      await nc2.close();
      await fresh.stop();
    }
  });

  test("server - the event stream sends the snapshot, then patches", async () => {
    const ui = await startUiServer({ store: source.store, port: 0, assets });
    try {
      const res = await fetch(`${ui.url}api/events`);
      expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
      const reader = res.body?.getReader();
      if (!reader) throw new Error("no body");
      const events: Array<{ event: string; data: unknown }> = [];
      let text = "";
      const read = async (n: number) => {
        while (events.length < n) {
          const { value } = await reader.read();
          text += new TextDecoder().decode(value);
          let end: number;
          while ((end = text.indexOf("\n\n")) >= 0) {
            const block = text.slice(0, end);
            text = text.slice(end + 2);
            const event = /^event: (.*)$/m.exec(block)?.[1];
            const data = /^data: (.*)$/m.exec(block)?.[1];
            if (event && data) events.push({ event, data: decodeView(data) });
          }
        }
      };
      await read(1);
      const snap = events[0]?.data as UiSnapshot;
      expect(events[0]?.event).toBe("snapshot");
      expect(snap.rounds[6]?.kl).toBeNaN();
      await publishRound(js, 43, "published");
      await read(2);
      const patch = events[1]?.data as UiPatch;
      expect(events[1]?.event).toBe("patch");
      expect(patch.revision).toBeGreaterThan(snap.revision);
      expect(patch.rounds?.map((r) => r.round)).toContain(43);
      await reader.cancel();
    } finally {
      await ui.close();
    }
  });

  test("server - routes, methods and the Host check", async () => {
    const ui = await startUiServer({ store: source.store, port: 0, assets });
    try {
      const page = await fetch(ui.url);
      expect(page.status).toBe(200);
      expect(page.headers.get("content-security-policy")).toContain("default-src 'none'");
      const html = await page.text();
      const script = /src="\.\/(assets\/[^"]+\.js)"/.exec(html)?.[1];
      expect((await fetch(ui.url + script)).headers.get("cache-control")).toContain("immutable");
      expect(((await (await fetch(`${ui.url}api/snapshot`)).json()) as UiSnapshot).policy).toBe(P);
      expect((await fetch(`${ui.url}nothing`)).status).toBe(404);
      expect((await fetch(`${ui.url}../../etc/passwd`)).status).toBe(404);
      expect((await fetch(`${ui.url}api/snapshot`, { method: "POST" })).status).toBe(405);
      // fetch may not set Host; node:http may: a DNS-rebound page's request carries the attacker's name
      const { request } = await import("node:http");
      const rebound = await new Promise<number>((resolve, reject) => {
        request({ host: "127.0.0.1", port: ui.port, path: "/api/snapshot", headers: { host: `evil.example:${ui.port}` } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        }).on("error", reject).end();
      });
      expect(rebound).toBe(421);
    } finally {
      await ui.close();
    }
  });

  test("server - mountUi puts the page under a base path of another server, beside its routes", async () => {
    const ui = await mountUi(nc, { policy: P, source: server.url, host: "127.0.0.1", assets, requestTimeoutMs: 300 });
    await ui.caughtUp;
    const { createServer } = await import("node:http");
    const http = createServer((req, res) => {
      if (!ui.handle(req, res)) res.writeHead(200).end("metrics");
    });
    await new Promise<void>((r) => http.listen(0, "127.0.0.1", () => r()));
    const base = `http://127.0.0.1:${(http.address() as { port: number }).port}`;
    try {
      expect(await (await fetch(`${base}/metrics`)).text()).toBe("metrics");
      const bare = await fetch(`${base}/ui`, { redirect: "manual" });
      expect([bare.status, bare.headers.get("location")]).toEqual([308, "/ui/"]);
      expect(await (await fetch(`${base}/ui/`)).text()).toContain("./assets/");
      const snap = decodeView<UiSnapshot>(await (await fetch(`${base}/ui/api/snapshot`)).text());
      expect(snap.rounds.length).toBeGreaterThanOrEqual(42);
    } finally {
      await ui.stop();
      http.closeAllConnections();
      await new Promise((r) => http.close(r));
    }
  });
});

function liveStats(): StatsEvent {
  return {
    type: "stats", policy: P, at: new Date().toISOString(), phase: "intake", health: { status: "ok", cause: null, since: null }, round: 0, open_round: 1,
    training_round: null, buffered_rows: 0, buffered_rollouts: 0, rows_per_s: 0, pending_acks: 0, rejected: 0, last: null, gpu_memory_bytes: null, uptime_s: 1,
  };
}
