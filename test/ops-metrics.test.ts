// What an operator's tools meet: the metric names a Prometheus user expects (scraped from a running daemon), the
// Grafana dashboard's queries naming only metrics that exist, /livez and /readyz through a NATS outage, the
// documented exit codes, and `node bin/rlloop.js` running the compiled CLI without tsx installed.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { createServer, type AddressInfo } from "node:net";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { codesOf, RejectReason } from "../src/contract/index.js";
import { parseConfig } from "../src/loop/config/index.js";
import { Daemon } from "../src/loop/daemon.js";
import { maxAckPending } from "../src/loop/intake.js";
import { POLICY, REPO, cliArgs, eventsOn, makeRollout, publishRollouts, spawnDaemon, startLoopEnv, waitFor, type LoopEnv } from "./helpers/loop.js";
import { ROLLOUT_STREAM, subjects } from "../src/contract/index.js";

/** Metric names and types a scrape declares (`# TYPE name type`). */
function declared(scrape: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of scrape.split("\n")) {
    const m = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (m) out.set(m[1] as string, m[2] as string);
  }
  return out;
}

describe("ops - metrics and probes of a running daemon", () => {
  let env: LoopEnv;
  let daemon: Daemon;
  let base: string;

  beforeAll(async () => {
    env = await startLoopEnv();
    daemon = new Daemon({ config: parseConfig(env.config({ log: { level: "error" } })) });
    await daemon.start();
    base = `http://127.0.0.1:${daemon.metricsPort}`;
    await publishRollouts(env.js, await Promise.all([0, 1, 2, 3].map((i) => makeRollout("metrics", i, { steps: 2 }))));
    await waitFor("round 1 published", async () => (await eventsOn(env.jsm, subjects(POLICY).adapterPublished)).length === 1 || null);
  });

  afterAll(async () => {
    await daemon?.stop();
    await env?.close();
  });

  it("exposes the standard process metrics unprefixed, one gauge per statistic with its unit, counters initialised at 0", async () => {
    const scrape = await (await fetch(`${base}/metrics`)).text();
    const names = declared(scrape);
    for (const name of ["process_cpu_seconds_total", "process_resident_memory_bytes", "nodejs_eventloop_lag_p99_seconds", "nodejs_heap_size_used_bytes"]) {
      expect(names.has(name), name).toBe(true);
    }
    expect([...names.keys()].filter((n) => n.startsWith("rlloop_process_"))).toEqual([]);
    const expected: Record<string, string> = {
      rlloop_build_info: "gauge", rlloop_rollouts_accepted_total: "counter", rlloop_rows_accepted_total: "counter",
      rlloop_rollouts_rejected_total: "counter", rlloop_rounds_total: "counter", rlloop_committed_round: "gauge",
      rlloop_buffered_rows: "gauge", rlloop_buffered_rollouts: "gauge", rlloop_pending_acks: "gauge", rlloop_phase: "gauge",
      rlloop_rollouts_waiting: "gauge", rlloop_copies_waiting: "gauge", rlloop_consumer_ack_pending: "gauge", rlloop_consumer_max_ack_pending: "gauge", rlloop_round_events_unpublished: "gauge",
      rlloop_stream_bytes: "gauge",
      rlloop_degraded: "gauge", rlloop_gpu_memory_bytes: "gauge", rlloop_last_round_pg_loss: "gauge", rlloop_last_round_kl: "gauge",
      rlloop_last_round_clip_fraction: "gauge", rlloop_last_round_logp_gap: "gauge", rlloop_last_round_logp_gap_abs: "gauge",
      rlloop_last_round_rows: "gauge", rlloop_last_round_train_seconds: "gauge", rlloop_round_latency_seconds: "histogram",
      rlloop_train_seconds: "histogram", rlloop_round_step_seconds: "histogram",
      // issue 23: live outcomes per adapter and the guard
      rlloop_rollbacks_total: "counter", rlloop_adapter_rollouts: "gauge", rlloop_adapter_reward_mean: "gauge", rlloop_adapter_reward_sd: "gauge",
      rlloop_adapter_success_rate: "gauge", rlloop_guard_regressed: "gauge",
    };
    for (const [name, type] of Object.entries(expected)) expect(names.get(name), name).toBe(type);
    expect([...names.keys()].filter((n) => n.startsWith("rlloop_")).sort()).toEqual(Object.keys(expected).sort());
    for (const reason of codesOf(RejectReason)) expect(scrape).toContain(`rlloop_rollouts_rejected_total{reason="${reason}"} 0`);
    expect(scrape).toContain('rlloop_rounds_total{outcome="published"} 1');
    expect(scrape).toContain('rlloop_rounds_total{outcome="empty"} 0');
    expect(scrape).toMatch(/rlloop_build_info\{version="\d+\.\d+\.\d+",node="v\d+/);
    expect(scrape).toContain("rlloop_last_round_rows 8");
    expect(scrape).toContain(`rlloop_gpu_memory_bytes ${2 ** 30}`);
    expect(scrape).toContain("rlloop_round_latency_seconds_count 1");
    for (const step of ["assemble", "train", "commit", "publish"]) expect(scrape).toContain(`rlloop_round_step_seconds_count{step="${step}"} 1`);
    expect(scrape).toContain("rlloop_rollouts_waiting 0");
    // the consumer by the server's count, from the stats tick: its limit, and nothing pending once the round is acked
    const limit = maxAckPending(parseConfig(env.config()));
    await waitFor("the consumer's state scraped", async () => {
      const s = await (await fetch(`${base}/metrics`)).text();
      return s.includes(`rlloop_consumer_max_ack_pending ${limit}`) && s.includes("rlloop_consumer_ack_pending 0") ? true : null;
    });
    // the streams' sizes, as the server counts them: the store to size is theirs
    const rollouts = (await env.jsm.streams.info(ROLLOUT_STREAM)).state.bytes;
    expect(rollouts).toBeGreaterThan(0);
    const sized = await waitFor("the streams' bytes scraped", async () => {
      const s = await (await fetch(`${base}/metrics`)).text();
      const m = /^rlloop_stream_bytes\{stream="RLLOOP_ROLLOUTS"\} (\d+)$/m.exec(s);
      return m && /^rlloop_stream_bytes\{stream="RLLOOP_EVENTS"\} [1-9]\d*$/m.test(s) ? Number(m[1]) : null;
    });
    expect(sized).toBe(rollouts); // nothing published to it since
  });

  it("ops/grafana-dashboard.json queries only metrics the daemon exports", async () => {
    const names = declared(await (await fetch(`${base}/metrics`)).text());
    const dashboard = JSON.parse(readFileSync(join(REPO, "ops", "grafana-dashboard.json"), "utf8")) as { panels: Array<{ title: string; targets: Array<{ expr: string }> }> };
    const queried = dashboard.panels.flatMap((p) => p.targets.flatMap((t) => [...t.expr.matchAll(/\b(rlloop_[a-z_]+|process_[a-z_]+|nodejs_[a-z0-9_]+)/g)].map((m) => m[1] as string)));
    expect(queried.length).toBeGreaterThan(15);
    const exists = (name: string) => names.has(name) || names.get(name.replace(/_(bucket|sum|count)$/, "")) === "histogram";
    expect(queried.filter((name) => !exists(name))).toEqual([]);
  });

  it("/livez stays 200 through a NATS outage; /readyz (and /healthz) answers 503 until NATS is back", async () => {
    const probe = async (path: string) => {
      const res = await fetch(`${base}${path}`);
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    expect(await probe("/readyz")).toMatchObject({ status: 200, body: { ready: true, connected: true, trainer: true } });
    await env.server.shutdown();
    try {
      const down = await waitFor("not ready", async () => {
        const r = await probe("/readyz");
        return r.status === 503 ? r : null;
      });
      expect(down.body).toMatchObject({ ready: false, connected: false });
      expect((await probe("/healthz")).status).toBe(503);
      expect(await probe("/livez")).toEqual({ status: 200, body: { live: true } });
    } finally {
      await env.server.restart();
    }
    await waitFor("ready again", async () => ((await probe("/readyz")).status === 200 ? true : null));
  });
});

describe("ops - exit codes", () => {
  it("usage and config errors 2, runtime failure 1, conflict 3, a forced second signal 143", async () => {
    const env = await startLoopEnv();
    try {
      const cli = (...args: string[]) => execa(process.execPath, cliArgs(...args), { cwd: REPO, reject: false, timeout: 60_000 });
      expect((await cli("status", "--no-such-flag")).exitCode).toBe(2);
      expect((await cli("daemon", "--config", env.writeConfig({ round: { rows: 0 } }))).exitCode).toBe(2);
      const unreachable = join(env.dir, "unreachable.json");
      writeFileSync(unreachable, JSON.stringify({ workDir: join(env.dir, "w2"), nats: { url: "nats://127.0.0.1:1" } }));
      expect((await cli("status", "--config", unreachable, "--timeout-s", "0.5")).exitCode).toBe(1);
      const file = env.writeConfig({ log: { level: "info" }, trainer: { env: { FAKE_TRAINER_SLEEP_MS: "3000" } } });
      const first = spawnDaemon(file);
      await first.waitForLog("daemon started", (l) => l.msg === "daemon started");
      expect((await cli("daemon", "--config", file)).exitCode).toBe(3);
      // a round in training: the first SIGTERM starts a drain that waits for it, the second exits at once
      await publishRollouts(env.js, await Promise.all([0, 1, 2, 3].map((i) => makeRollout("exit", i, { steps: 2 }))));
      await first.waitForLog("training", (l) => l.msg === "round assembled");
      first.child.kill("SIGTERM");
      await first.waitForLog("draining", (l) => l.msg === "draining");
      first.child.kill("SIGTERM");
      expect(await first.exited).toBe(143);
    } finally {
      await env.close();
    }
  });
});

describe("ops - a failed start", () => {
  it("a daemon whose metrics port is taken exits 1 naming it, and reports no fault of its own closing", async () => {
    const env = await startLoopEnv();
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, "127.0.0.1", () => r()));
    try {
      const port = (blocker.address() as AddressInfo).port;
      const daemon = spawnDaemon(env.writeConfig({ log: { level: "info" }, observe: { metricsPort: port } }));
      expect(await daemon.exited).toBe(1);
      expect(daemon.stderr()).toContain("EADDRINUSE");
      // the start closes its own NATS connection: not "the connection closed and will not reconnect"
      expect(daemon.lines.filter((l) => l.msg === "NATS connection lost for good")).toEqual([]);
    } finally {
      await new Promise<void>((r) => blocker.close(() => r()));
      await env.close();
    }
  });
});

describe("ops - the compiled CLI", () => {
  it("node bin/rlloop.js runs dist/ without tsx installed", async () => {
    const copy = mkdtempSync(join(tmpdir(), "rlloop-no-tsx-"));
    for (const entry of ["bin", "dist", "config", "schema", "package.json"]) symlinkSync(join(REPO, entry), join(copy, entry));
    mkdirSync(join(copy, "node_modules"));
    for (const pkg of readdirSync(join(REPO, "node_modules"))) {
      if (pkg !== "tsx" && pkg !== ".bin") symlinkSync(join(REPO, "node_modules", pkg), join(copy, "node_modules", pkg));
    }
    const version = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string };
    const run = await execa(process.execPath, [join(copy, "bin", "rlloop.js"), "--version"], { cwd: copy });
    expect(run.stdout).toBe(version.version);
    const help = await execa(process.execPath, [join(copy, "bin", "rlloop.js"), "simulate", "--help"], { cwd: copy });
    expect(help.stdout).toContain("Example");
    // each default is printed once
    expect(help.stdout.match(/\(default: 32\)/g)).toHaveLength(1);
  });
});

describe("ops - the web dashboard on the daemon's metrics endpoint (observe.ui)", () => {
  it("serves the page and its data under observe.ui.path beside /metrics, behind its token", async () => {
    const env = await startLoopEnv();
    const daemon = new Daemon({ config: parseConfig(env.config({ log: { level: "error" }, observe: { statsIntervalS: 1, metricsPort: 0, ui: { enabled: true, path: "/ui/", token: "ui-token-for-test" } } })) });
    try {
      await daemon.start();
      await publishRollouts(env.js, await Promise.all([0, 1, 2, 3].map((i) => makeRollout("ui", i, { steps: 2 }))));
      await waitFor("round 1 published", async () => (await eventsOn(env.jsm, subjects(POLICY).adapterPublished)).length === 1 || null);
      const base = `http://127.0.0.1:${daemon.metricsPort}`;
      expect((await fetch(`${base}/ui/`)).status).toBe(401);
      const page = await fetch(`${base}/ui/?token=ui-token-for-test`, { redirect: "manual" });
      expect([200, 303]).toContain(page.status);
      const auth = { authorization: "Bearer ui-token-for-test" };
      const snapshot = await waitFor("round 1 in the dashboard's data", async () => {
        const res = await fetch(`${base}/ui/api/snapshot`, { headers: auth });
        const text = await res.text();
        return res.ok && text.includes('"round"') && text.includes("pg_loss") ? text : null;
      });
      expect(snapshot.length).toBeGreaterThan(100);
      expect((await fetch(`${base}/metrics`)).status).toBe(200);
    } finally {
      await daemon.stop();
      await env.close();
    }
  });
});
