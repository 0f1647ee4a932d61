// The web UI in a real browser (headless Chromium, test/helpers/browser.ts) against a running daemon (the CLI,
// with the test-double trainer) on a real nats-server, through `rlloop ui` as an operator starts it: the page
// loads without console errors, its plotted columns equal the committed rounds' stats.json, a new round and a
// rejection appear without a reload, the reward per serving adapter is the published rollouts', the adapter
// table carries each adapter's sha256 and the replicas' loads. The last test writes docs/ui.png for the README.
// A second suite drives the page with hand-written events: a degraded daemon and its cause, a page behind a token.
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { decodeStats, eventSubject, subjects, type PpoStats, type RolloutCompletedInput } from "../src/contract/index.js";
import { roundDir } from "../src/loop/paths.js";
import { buildUi } from "../src/tools/ui/build.js";
import type { UiSnapshot } from "../src/tools/ui/model.js";
import { startUiServer, type UiServer } from "../src/tools/ui/server.js";
import { startUiSource, type UiSource } from "../src/tools/ui/source.js";
import { launchBrowser, type TestBrowser } from "./helpers/browser.js";
import {
  POLICY, REPO, cliArgs, eventsOn, makeRollout, publishRollouts, spawnDaemon, startLoopEnv, waitFor, type DaemonProcess, type LoopEnv,
} from "./helpers/loop.js";

const SCREENSHOT = join(REPO, "docs", "ui.png");
const STATS_FIELDS = ["pg_loss", "kl", "clip_frac", "logp_gap", "logp_gap_abs", "rows", "train_s"] as const;
/** the chart each statistic is plotted on (logp_gap_abs shares logp_gap's) */
const CHART_OF: Record<(typeof STATS_FIELDS)[number], string> = {
  pg_loss: "pg_loss", kl: "kl", clip_frac: "clip_frac", logp_gap: "logp_gap", logp_gap_abs: "logp_gap", rows: "rows", train_s: "train_s",
};

type Plotted = Record<string, { x: number[]; series: Record<string, Array<number | null>> }>;
const plotted = (page: Page) => page.evaluate(() => window.rlloopUi.plotted()) as Promise<Plotted>;
const view = (page: Page) => page.evaluate(() => window.rlloopUi.view()) as Promise<UiSnapshot | null>;

/** `rlloop ui` as a child process; resolves with the address it prints. */
function spawnUi(args: string[]): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, cliArgs("ui", ...args), { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] });
  return new Promise((resolve, reject) => {
    let out = "";
    let err = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const url = /at (http:\/\/\S+\/)/.exec(out)?.[1];
      if (url) resolve({ child, url });
    });
    child.stderr?.on("data", (chunk: Buffer) => (err += chunk.toString()));
    child.once("exit", (code) => reject(new Error(`rlloop ui exited (${code}) before serving:\n${out}\n${err}`)));
  });
}

async function stopChild(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGTERM");
  await exited;
}

describe("ui - in a real browser, against a running daemon", () => {
  let env: LoopEnv;
  let daemon: DaemonProcess;
  let ui: { child: ChildProcess; url: string };
  let browser: TestBrowser;
  let page: Page;
  let errors: string[];
  const published: RolloutCompletedInput[] = [];
  let next = 0;

  /** Rollouts served by the newest adapter that close round `round` (4 rollouts of 2 steps = round.rows), then
   *  its announcement. */
  async function playRound(round: number): Promise<void> {
    const rollouts = await Promise.all([0, 1, 2, 3].map(() => makeRollout("ui", next++, { steps: 2, adapterRound: round - 1 })));
    published.push(...rollouts);
    await publishRollouts(env.js, rollouts);
    await waitFor(`round ${round} published`, async () => (await eventsOn<{ round: number }>(env.jsm, subjects(POLICY).adapters)).some((a) => a.round === round));
  }

  const committedStats = (round: number): PpoStats => decodeStats(readFileSync(join(roundDir(env.workDir, POLICY, round), "adapter", "stats.json"), "utf8"));

  beforeAll(async () => {
    await buildUi();
    env = await startLoopEnv();
    const config = env.writeConfig();
    daemon = spawnDaemon(config);
    for (const round of [1, 2, 3]) await playRound(round);
    ui = await spawnUi(["--config", config, "--port", "0"]);
    browser = await launchBrowser();
    ({ page, errors } = await browser.page({ width: 1400, height: 1000 }));
    await page.goto(ui.url);
    await page.waitForFunction(() => window.rlloopUi?.ready === true && window.rlloopUi.view()?.caughtUp === true);
  });

  afterAll(async () => {
    await browser?.close();
    await stopChild(ui?.child);
    await stopChild(daemon?.child);
    await env?.close();
  });

  test("ui - the page loads without console errors and plots the committed rounds' stats.json", async () => {
    await page.waitForFunction(() => (window.rlloopUi.view()?.rounds ?? []).filter((r) => r.status === "published").length === 3
      && window.rlloopUi.plotted().pg_loss?.series.pg_loss?.filter((v) => v !== null).length === 3);
    const charts = await plotted(page);
    for (const round of [1, 2, 3]) {
      const stats = committedStats(round);
      for (const field of STATS_FIELDS) {
        const chart = charts[CHART_OF[field]];
        const at = chart?.x.indexOf(round) ?? -1;
        expect(at, `round ${round} on the ${CHART_OF[field]} chart`).toBeGreaterThanOrEqual(0);
        expect(chart?.series[field]?.[at], `round ${round} ${field}`).toBe(stats[field]);
      }
    }
    expect(charts.latency_s?.series.latency_s?.every((v) => v !== null && v >= 0)).toBe(true);
    const live = (await view(page))?.live;
    expect(live).toMatchObject({ connected: true, committedRound: 3, health: { status: "ok" }, roundRows: 8, servingAdapter: { round: 3 } });
    expect(errors).toEqual([]);
  });

  test("ui - a new round appears without a reload", async () => {
    await page.evaluate(() => ((window as unknown as { notReloaded: boolean }).notReloaded = true));
    await playRound(4);
    // what is plotted, not only what the page knows: it redraws at most every 250 ms
    await page.waitForFunction(() => {
      const kl = window.rlloopUi.plotted().kl;
      const at = kl?.x.indexOf(4) ?? -1;
      return at >= 0 && kl?.series.kl?.[at] !== null && window.rlloopUi.view()?.rounds.at(-1)?.status === "published";
    });
    expect(await page.evaluate(() => (window as unknown as { notReloaded?: boolean }).notReloaded)).toBe(true);
    const charts = await plotted(page);
    const at = charts.kl?.x.indexOf(4) ?? -1;
    expect(charts.kl?.series.kl?.[at]).toBe(committedStats(4).kl);
    expect(errors).toEqual([]);
  });

  test("ui - a rejected rollout shows up under its reason", async () => {
    const bad = await makeRollout("ui-bad", 0, { steps: 1, adapterRound: 4 });
    const step = bad.steps[0];
    if (step) step.code = "12"; // code_length: the policy's codes have 4 digits
    published.push(bad);
    await publishRollouts(env.js, [bad]);
    const row = page.locator('#reasons-body tr[data-reason="code_length"]');
    await row.waitFor();
    await expect.poll(() => row.locator("td.n").textContent()).toBe("1");
    expect(await row.locator("td.message").textContent()).toContain("digits");
    const charts = await plotted(page);
    expect(charts.rejections?.series.code_length?.at(-1)).toBe(1);
    expect(errors).toEqual([]);
  });

  test("ui - the reward of each serving adapter is the mean of its rollouts' rewards", async () => {
    const expected = new Map<number, number[]>();
    for (const r of published) expected.set(r.adapter.round, [...(expected.get(r.adapter.round) ?? []), r.reward]);
    await page.waitForFunction((n) => (window.rlloopUi.view()?.rewards ?? []).reduce((s, r) => s + r.count, 0) === n, published.length);
    const rewards = (await view(page))?.rewards ?? [];
    expect(rewards.map((r) => r.adapterRound)).toEqual([...expected.keys()].sort((a, b) => a - b));
    for (const r of rewards) {
      const values = expected.get(r.adapterRound) ?? [];
      expect(r.count).toBe(values.length);
      expect(r.mean).toBeCloseTo(values.reduce((s, v) => s + v, 0) / values.length, 12);
    }
    await expect.poll(async () => (await plotted(page)).reward?.series.mean).toEqual(rewards.map((r) => r.mean));
  });

  test("ui - the adapter table shows each adapter's sha256, the gate's verdict and each replica's load", async () => {
    const announced = await eventsOn<{ round: number; name: string; sha256: string }>(env.jsm, subjects(POLICY).adapters);
    const r4 = announced.find((a) => a.round === 4);
    expect(r4).toBeDefined();
    // what `rlloop reload` publishes for two replicas
    const at = new Date().toISOString();
    await env.js.publish(eventSubject(POLICY, "replica.loaded"), JSON.stringify({ type: "replica.loaded", policy: POLICY, replica: "http://gpu1:8000", name: r4?.name, at }));
    await env.js.publish(eventSubject(POLICY, "replica.load_failed"), JSON.stringify({ type: "replica.load_failed", policy: POLICY, replica: "http://gpu2:8000", name: r4?.name, reason: "503 Service Unavailable", at }));
    const row = page.locator('#adapters-body tr[data-round="4"]');
    await expect.poll(() => row.locator("td.load").allTextContents()).toEqual(["loaded", "failed"]);
    expect(await row.locator("td.sha").getAttribute("title")).toBe(r4?.sha256);
    expect(await row.locator("td.verdict").textContent()).toBe("passed");
    expect(await page.locator('#replicas-body tr[data-replica="http://gpu2:8000"] td.message').textContent()).toBe("503 Service Unavailable");
    expect(errors).toEqual([]);
  });

  test("ui - a screenshot after a few rounds (docs/ui.png)", async () => {
    for (const round of [5, 6]) await playRound(round);
    // settled: the daemon's stats say round 6 is committed and it is buffering again
    await page.waitForFunction(() => window.rlloopUi.view()?.live.committedRound === 6 && window.rlloopUi.view()?.live.phase === "intake");
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    expect(errors).toEqual([]);
  });
});

describe("ui - in a real browser, with hand-written events", () => {
  let env: LoopEnv;
  let source: UiSource;
  let server: UiServer;
  let browser: TestBrowser;

  beforeAll(async () => {
    await buildUi();
    env = await startLoopEnv();
    source = await startUiSource(env.nc, { policy: POLICY, source: env.server.url, requestTimeoutMs: 300, statsIntervalS: 1 });
    browser = await launchBrowser();
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await source?.stop();
    await env?.close();
  });

  test("ui - a degraded daemon is shown with its cause", async () => {
    server = await startUiServer({ store: source.store, port: 0 });
    const { page, errors } = await browser.page();
    await page.goto(server.url);
    await page.waitForFunction(() => window.rlloopUi?.ready === true);
    expect(await page.locator("#degraded").isHidden()).toBe(true);
    const stats = {
      type: "stats", policy: POLICY, at: new Date().toISOString(), phase: "waiting",
      health: { status: "degraded", cause: "the trainer exited with code 1 on the probe job", since: new Date().toISOString() },
      round: 7, open_round: 8, training_round: null, buffered_rows: 5, buffered_rollouts: 2, rows_per_s: 0, pending_acks: 2, rejected: 0,
      last: null, gpu_memory_bytes: null, uptime_s: 12,
    };
    env.nc.publish(subjects(POLICY).stats, JSON.stringify(stats));
    await page.locator("#degraded").waitFor({ state: "visible" });
    expect(await page.locator("#degraded").textContent()).toContain("the trainer exited with code 1 on the probe job");
    expect(await page.locator("#health").textContent()).toBe("degraded");
    expect(await page.locator("#phase").textContent()).toBe("waiting");
    expect(await page.locator("#card-round").textContent()).toBe("7");
    expect(errors).toEqual([]);
    await page.close();
    await server.close();
  });

  test("ui - behind a token, the page opens only with it and keeps it out of the address bar", async () => {
    server = await startUiServer({ store: source.store, port: 0, token: "s3cret" });
    expect((await fetch(server.url)).status).toBe(401);
    expect((await fetch(`${server.url}api/snapshot`, { headers: { authorization: "Bearer s3cret" } })).status).toBe(200);
    const { page, errors } = await browser.page();
    await page.goto(`${server.url}?token=s3cret`);
    await page.waitForFunction(() => window.rlloopUi?.ready === true);
    expect(page.url()).toBe(server.url);
    expect(errors).toEqual([]);
    await page.close();
  });
});
