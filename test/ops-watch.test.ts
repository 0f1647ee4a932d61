// `rlloop watch`: the renderer is a pure function of the state (asserted as exact text), the reducers fold the
// daemon's events into rows, and the watcher reads the daemon's real service endpoints and live subjects on a
// real nats-server; `watch --once` prints one frame through the CLI.
import type { NatsConnection } from "@nats-io/nats-core";
import type { Service } from "@nats-io/services";
import { connect } from "@nats-io/transport-node";
import { execa } from "execa";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { subjects, type PpoStats, type ReplicaEvent, type RoundEvent, type RoundSummary, type StatsEvent } from "../src/contract/index.js";
import { startService } from "../src/loop/service.js";
import { initialState, withReplica, withRoundEvent, withRoundSummaries, withStats, type WatchState } from "../src/tools/watch/watch-state.js";
import { duration, num, renderWatch } from "../src/tools/watch/watch-view.js";
import { startWatcher } from "../src/tools/watch/watcher.js";
import { startNatsServer, type NatsServer } from "./helpers/nats.js";

/** The service's rollback endpoint, for a source that has none to do. */
const refuseRollback = async (): Promise<never> => {
  throw new Error("this test's service does no rollbacks");
};

const REPO = join(import.meta.dirname, "..");
const NOW = Date.UTC(2026, 11, 2, 10, 0, 4);
const at = (s: number) => new Date(Date.UTC(2026, 11, 2, 10, 0, s)).toISOString();
const ppo = (over: Partial<PpoStats> = {}): PpoStats => ({ pg_loss: -0.0123, kl: 0.0045, clip_frac: 0.031, logp_gap: 0.0021, logp_gap_abs: 0.003, rows: 256, train_s: 32, ...over });

const stats: StatsEvent = {
  type: "stats", policy: "bt", at: at(0), phase: "training", health: { status: "ok", cause: null, since: null }, round: 12, open_round: 14, training_round: 13,
  buffered_rows: 184, buffered_rollouts: 46, rows_per_s: 23.46, pending_acks: 230, rejected: 3,
  last: { round: 12, outcome: "published", pg_loss: -0.0123, kl: 0.0045, clip_frac: 0.031, logp_gap: 0.0021, logp_gap_abs: 0.003 },
  gpu_memory_bytes: 61.2 * 2 ** 30, uptime_s: 3 * 3600 + 12 * 60 + 5,
};

const lifecycle = (round: number, outcome: "published" | "rejected", extra: Partial<PpoStats> = {}): RoundEvent[] => {
  const base = { policy: "bt", round, at: at(1) };
  return [
    { type: "round.closed", ...base, trigger: "rows", rows: 256, rollouts: 64 },
    { type: "round.assembled", ...base, rows: 256, sha256: "ab".repeat(32), dir: `/runs/${round}` },
    { type: "round.training", ...base, attempt: 1 },
    { type: "round.trained", ...base, stats: ppo(extra) },
    ...(outcome === "rejected" ? [{ type: "round.rejected" as const, ...base, reason: "logp_gap_abs 0.31 > gate.maxLogpGapAbs 0.2", stats: ppo(extra) }] : []),
    { type: "round.committed", ...base, outcome, revision: round + 1 },
    ...(outcome === "published" ? [{ type: "round.published" as const, ...base, name: `bt-r${round}` }] : []),
  ];
};

function exampleState(): WatchState {
  let s = withStats(initialState("bt", "nats://127.0.0.1:4222", 12), stats, NOW - 4000);
  for (const e of [...lifecycle(11, "rejected", { pg_loss: -0.3, kl: 0.09, clip_frac: 0.45, logp_gap: 0.31, train_s: 30.5 }), ...lifecycle(12, "published")]) s = withRoundEvent(s, e);
  s = withRoundEvent(s, { type: "round.training", policy: "bt", round: 13, at: at(3), attempt: 2 });
  const reloads: ReplicaEvent[] = [
    { type: "replica.loaded", policy: "bt", replica: "http://gpu1:8000", name: "bt-r12", at: at(2) },
    { type: "replica.load_failed", policy: "bt", replica: "http://gpu2:8000", name: "bt-r12", reason: "503 Service Unavailable", at: at(3) },
  ];
  for (const e of reloads) s = withReplica(s, e);
  return s;
}

describe("watch - renderer (pure)", () => {
  test("renders phase, buffer, rates, last round, the round table and replicas", () => {
    expect(renderWatch(exampleState(), { nowMs: NOW, width: 140, statsIntervalS: 10 })).toBe([
      "rlloop watch · policy bt · nats://127.0.0.1:4222 · 10:00:04 UTC",
      "phase     training — the trainer runs the round",
      "round     12 committed · 14 open · 13 training",
      "buffered  184 rows in 46 rollouts · intake 23.5 rows/s · pending acks 230 · rejected 3",
      "last      r12 published · pg_loss -0.0123 · kl 0.0045 · clip_frac 0.0310 · logp_gap 0.0021",
      "gpu       61.2 GiB · uptime 3h12m · stats 4 s ago",
      "",
      " round status         rows    pg_loss         kl  clip_frac   logp_gap   rows/s",
      "    13 training #2       –          –          –          –          –        –",
      "    12 published       256    -0.0123     0.0045     0.0310     0.0021      8.0",
      "    11 rejected        256    -0.3000     0.0900     0.4500     0.3100      8.4   logp_gap_abs 0.31 > gate.maxLogpGapAbs 0.2",
      "",
      "replicas",
      "  http://gpu1:8000  bt-r12  loaded       10:00:02",
      "  http://gpu2:8000  bt-r12  load_failed  10:00:03  503 Service Unavailable",
      "",
    ].join("\n"));
  });

  test("before any stats it says what it waits for; old stats are marked stale", () => {
    const empty = renderWatch(initialState("bt", "nats://x", 5), { nowMs: NOW, width: 80, statsIntervalS: 10 });
    expect(empty).toBe("rlloop watch · policy bt · nats://x · 10:00:04 UTC\nwaiting for stats on rlloop.bt.stats ...\n\nno rounds yet\n");
    const old = withStats(initialState("bt", "nats://x", 5), stats, NOW - 31_000);
    expect(renderWatch(old, { nowMs: NOW, width: 200, statsIntervalS: 10 })).toContain("stats 31 s ago (stale: is the daemon running?)");
  });

  test("lines are cut to the terminal width", () => {
    for (const line of renderWatch(exampleState(), { nowMs: NOW, width: 40, statsIntervalS: 10 }).split("\n")) expect(line.length).toBeLessThanOrEqual(40);
  });

  test.each([
    [null, "–"], [Number.NaN, "NaN"], [Number.POSITIVE_INFINITY, "inf"], [Number.NEGATIVE_INFINITY, "-inf"],
    [0, "0.0000"], [-0.01234, "-0.0123"], [0.0004, "4.00e-4"], [12345.6, "1.23e+4"],
  ])("num(%s) = %s", (value, text) => expect(num(value)).toBe(text));

  test.each([[5, "5s"], [125, "2m05s"], [3 * 3600 + 60, "3h01m"], [2 * 86400 + 7200, "2d02h"]])("duration(%s) = %s", (s, text) => expect(duration(s)).toBe(text));
});

describe("watch - reducers", () => {
  test("a round's row follows its lifecycle; rows/s is rows / train_s", () => {
    let s = initialState("bt", "x", 12);
    const seen: string[] = [];
    for (const e of lifecycle(5, "published", { rows: 100, train_s: 8 })) {
      s = withRoundEvent(s, e);
      seen.push(s.rounds[0]?.status ?? "");
    }
    expect(seen).toEqual(["closed", "assembled", "training", "trained", "published", "published"]);
    expect(s.rounds[0]).toMatchObject({ round: 5, rows: 256, rowsPerS: 12.5, pg_loss: -0.0123 });
  });

  test("the table keeps the newest rounds only, and service summaries fill history", () => {
    let s = initialState("bt", "x", 3);
    const summaries: RoundSummary[] = [1, 2, 3, 4, 5].map((round) => ({ round, status: "published", rows: 10 * round, rollouts: round, sha256: "00".repeat(32), stats: ppo() }));
    s = withRoundSummaries(s, summaries);
    expect(s.rounds.map((r) => r.round)).toEqual([5, 4, 3]);
    s = withRoundEvent(s, { type: "round.attempt_failed", policy: "bt", round: 6, at: at(0), attempt: 3, fault: "trainer", error: "trainer exited 1" });
    expect(s.rounds.map((r) => [r.round, r.status, r.reason])).toEqual([[6, "failed #3", "trainer: trainer exited 1"], [5, "published", null], [4, "published", null]]);
  });
});

describe("watch - against the daemon's service on a real nats-server", () => {
  let server: NatsServer;
  let nc: NatsConnection;
  let service: Service;
  const summaries: RoundSummary[] = [
    { round: 2, status: "committed:published", rows: 64, rollouts: 16, sha256: "cd".repeat(32), stats: ppo({ rows: 64, train_s: 4 }) },
    { round: 1, status: "committed:rejected", rows: 64, rollouts: 16, sha256: "ef".repeat(32), stats: ppo({ clip_frac: 0.5 }) },
  ];

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    service = await startService(nc, "bt", { snapshot: () => ({ ...stats, round: 2, open_round: 3, training_round: null, phase: "intake" }), rounds: async (limit) => summaries.slice(0, limit), rollback: refuseRollback }, pino({ level: "silent" }));
  });
  afterAll(async () => {
    await service?.stop();
    await nc?.drain();
    await server?.stop();
  });

  test("starts from the service's status and rounds, then follows live stats, rounds and reloads", async () => {
    const changes: WatchState[] = [];
    const wakers: Array<() => void> = [];
    const watcher = await startWatcher(nc, { policy: "bt", source: server.url, maxRounds: 10, requestTimeoutMs: 5000 }, (s) => {
      changes.push(s);
      for (const wake of wakers.splice(0)) wake();
    });
    const until = async (ok: (s: WatchState) => boolean) => {
      while (!ok(watcher.state())) await new Promise<void>((wake) => wakers.push(wake));
    };
    expect(watcher.state()).toMatchObject({ notice: null, stats: { phase: "intake", round: 2 } });
    expect(watcher.state().rounds.map((r) => [r.round, r.status, r.rowsPerS])).toEqual([[2, "published", 16], [1, "rejected", 8]]);

    const names = subjects("bt");
    nc.publish(names.stats, JSON.stringify({ ...stats, phase: "assembling", round: 2, open_round: 3, training_round: 3 }));
    for (const e of lifecycle(3, "published")) nc.publish(names.round(e.type.slice("round.".length)), JSON.stringify(e));
    nc.publish(names.replica("loaded"), JSON.stringify({ type: "replica.loaded", policy: "bt", replica: "http://gpu1:8000", name: "bt-r3", at: at(5) }));
    nc.publish(names.stats, "not json"); // ignored
    await until((s) => s.rounds[0]?.status === "published" && s.rounds[0].round === 3 && s.replicas.length === 1 && s.stats?.phase === "assembling");
    expect(watcher.state().rounds.map((r) => r.round)).toEqual([3, 2, 1]);
    await watcher.stop();
  });

  test("`rlloop watch --once` prints one frame from the service", async () => {
    const run = await execa(process.execPath, ["bin/rlloop.js", "watch", "--once", "--nats", server.url, "--policy", "bt"], { cwd: REPO, env: { COLUMNS: "150" } });
    const lines = run.stdout.split("\n");
    expect(lines[0]).toMatch(new RegExp(`^rlloop watch · policy bt · ${server.url.replaceAll(".", "\\.")} · \\d\\d:\\d\\d:\\d\\d UTC$`));
    expect(lines).toContain("phase     intake — buffering rollouts into the open round");
    expect(lines).toContain("     2 published        64    -0.0123     0.0045     0.0310     0.0021     16.0");
  });

  test("when no daemon answers, --once says so instead of hanging", async () => {
    const run = await execa(process.execPath, ["bin/rlloop.js", "watch", "--once", "--nats", server.url, "--policy", "nobody", "--timeout-s", "0.3"], { cwd: REPO });
    expect(run.stdout).toContain("! no status from rlloop.nobody.svc.status");
    expect(run.stdout).toContain("waiting for stats on rlloop.nobody.stats ...");
  });
});
