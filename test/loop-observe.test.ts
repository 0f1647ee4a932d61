// Observability: the `rlloop` micro service (PING/INFO/STATS, status and rounds endpoints), periodic stats
// events, Prometheus /metrics and /healthz, `rlloop status`; and a daemon with no nats.url running its own
// nats-server, stopped gracefully by SIGTERM.
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { Svcm } from "@nats-io/services";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../src/loop/config/index.js";
import { Daemon } from "../src/loop/daemon.js";
import { decodeWithNonFinite, SERVICE_NAME, StatsEvent, RoundSummary, subjects } from "../src/contract/index.js";
import { POLICY, REPO, cliArgs, eventsOn, makeRollout, publishRollouts, spawnDaemon, startLoopEnv, waitFor, type LoopEnv } from "./helpers/loop.js";

const run = promisify(execFile);

describe("loop - observability", () => {
  let env: LoopEnv;
  let daemon: Daemon;

  beforeAll(async () => {
    env = await startLoopEnv();
    daemon = new Daemon({ config: parseConfig(env.config()) });
    await daemon.start();
    await publishRollouts(env.js, await Promise.all([0, 1, 2, 3].map((i) => makeRollout("obs", i, { steps: 2 }))));
    await waitFor("round 1 published", async () => (await eventsOn(env.jsm, subjects(POLICY).adapters)).length === 1);
  });

  afterAll(async () => {
    await daemon?.stop();
    await env?.close();
  });

  it("observe - the micro service answers PING, INFO, STATS, status and rounds", async () => {
    const client = new Svcm(env.nc as unknown as ConstructorParameters<typeof Svcm>[0]).client();
    const pings = [];
    for await (const p of await client.ping(SERVICE_NAME)) pings.push(p);
    expect(pings.map((p) => p.metadata?.policy)).toEqual([POLICY]);
    const infos = [];
    for await (const i of await client.info(SERVICE_NAME)) infos.push(i);
    expect(infos[0]?.endpoints.map((e) => e.subject).sort()).toEqual([subjects(POLICY).roundsQuery, subjects(POLICY).status, subjects(POLICY).rollbackRequest].sort());
    const stats = [];
    for await (const s of await client.stats(SERVICE_NAME)) stats.push(s);
    expect(stats).toHaveLength(1);

    const status = StatsEvent.parse((await env.nc.request(subjects(POLICY).status, "", { timeout: 2000 })).json());
    expect(status.round).toBe(1);
    expect(status.last?.outcome).toBe("published");
    const rounds = RoundSummary.array().parse((await env.nc.request(subjects(POLICY).roundsQuery, JSON.stringify({ limit: 5 }), { timeout: 2000 })).json());
    expect(rounds.map((r) => [r.round, r.status, r.rows, r.rollouts])).toEqual([[1, "committed:published", 8, 4]]);
    expect(RoundSummary.array().parse((await env.nc.request(subjects(POLICY).roundsQuery, "", { timeout: 2000 })).json())).toHaveLength(1);

    // a body the contract (src/contract/service-requests.ts) refuses is answered 400 with what is wrong, and does nothing
    const refused = async (subject: string, body: string) => {
      const reply = await env.nc.request(subject, body, { timeout: 5000 });
      return [reply.headers?.get("Nats-Service-Error-Code"), reply.headers?.get("Nats-Service-Error")];
    };
    expect(await refused(subjects(POLICY).roundsQuery, JSON.stringify({ limit: 1e9 }))).toEqual(["400", expect.stringMatching(/^'limit': /)]);
    expect(await refused(subjects(POLICY).roundsQuery, "{not json")).toEqual(["400", "the request body must be JSON"]);
    expect(await refused(subjects(POLICY).rollbackRequest, JSON.stringify({ to_round: -1 }))).toEqual(["400", expect.stringMatching(/^'to_round': /)]);
    expect(await refused(subjects(POLICY).rollbackRequest, JSON.stringify({ to_round: 0, reason: "x".repeat(501) }))).toEqual(["400", expect.stringMatching(/^'reason': /)]);
  });

  it("observe - stats events arrive every statsIntervalS and validate", async () => {
    const sub = env.nc.subscribe(subjects(POLICY).stats, { max: 1 });
    for await (const msg of sub) {
      const event = StatsEvent.parse(decodeWithNonFinite(msg.string()));
      expect(event.policy).toBe(POLICY);
      expect(event.round).toBe(1);
      expect(event.phase).toBe("intake");
      expect(event.health).toEqual({ status: "ok", cause: null, since: null });
      expect(event.gpu_memory_bytes, "the last round's stats.json gpu_memory_bytes").toBe(2 ** 30);
    }
  });

  it("observe - /metrics and /healthz (test/ops-metrics.test.ts checks the whole set)", async () => {
    const base = `http://127.0.0.1:${daemon.metricsPort}`;
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toContain('rlloop_rounds_total{outcome="published"} 1');
    expect(metrics).toContain("rlloop_rollouts_accepted_total 4");
    expect(metrics).toContain("rlloop_committed_round 1");
    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ ready: true, connected: true, round: 1 });
  });

  it("observe - rlloop status asks the running daemon", async () => {
    const { stdout } = await run(process.execPath, cliArgs("status", "--config", env.writeConfig()), { cwd: REPO });
    const answer = JSON.parse(stdout) as { daemon: { round: number; policy: string }; lease: { pid: number; work_dir: string } | null };
    expect(answer.daemon).toMatchObject({ round: 1, policy: POLICY });
    expect(answer.lease).toMatchObject({ pid: process.pid, work_dir: env.workDir });
  });
});

describe("loop - own nats-server", () => {
  it("starts its own nats-server when nats.url is null and stops it on SIGTERM", async () => {
    const env = await startLoopEnv();
    try {
      const config = env.writeConfig({ nats: { url: null }, log: { level: "info" } });
      const daemon = spawnDaemon(config);
      await daemon.waitForLog("daemon started", (l) => l.msg === "daemon started");
      const info = JSON.parse(readFileSync(join(env.workDir, "nats", "server.json"), "utf8")) as { pid: number; port: number };
      const { stdout } = await run(process.execPath, cliArgs("status", "--config", config), { cwd: REPO });
      expect((JSON.parse(stdout) as { daemon: { policy: string } }).daemon.policy).toBe(POLICY);
      daemon.child.kill("SIGTERM");
      expect(await daemon.exited).toBe(0);
      expect(existsSync(join(env.workDir, "nats", "server.json"))).toBe(false);
      expect(() => process.kill(info.pid, 0)).toThrow();
    } finally {
      await env.close();
    }
  });
});
