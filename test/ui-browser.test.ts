// The web UI in a real browser (headless Chromium, test/helpers/browser.ts) against a running daemon (the CLI,
// with the test-double trainer) on a real nats-server, through `rlloop ui` as an operator starts it: the page
// loads without console errors, its plotted columns equal the committed rounds' stats.json, a new round and a
// rejection appear without a reload, the reward per serving adapter is the published rollouts', the adapter
// table carries each adapter's sha256 and the replicas' loads, an operator's rollback (`rlloop rollback`) shows in
// the Rollbacks table, marks the plots and moves the serving adapter, also on a monitor started after it. The
// screenshot test writes docs/ui.png for the README. A second suite drives the page with hand-written events: a
// degraded daemon and its cause, a page behind a token, the guard's rollback with its evidence and the adversary's
// rollbacks (a duplicate, rounds never seen, many).
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Kvm } from "@nats-io/kv";
import { execa } from "execa";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  STATE_BUCKET, decodeStats, eventSubject, stateKey, statsReplacer, subjects, type AdapterRolledBack, type PpoStats, type RolloutCompletedInput,
} from "../src/contract/index.js";
import { roundDir } from "../src/loop/paths.js";
import { buildUi } from "../src/tools/ui/build.js";
import type { UiSnapshot } from "../src/tools/ui/model.js";
import type { DrawnMark } from "../src/tools/ui/page/markers.js";
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
const marks = (page: Page) => page.evaluate(() => window.rlloopUi.marks()) as Promise<Record<string, DrawnMark[]>>;
/** the plots whose x axis is a round: each carries the rollbacks' markers */
const ROUND_CHARTS = ["pg_loss", "kl", "clip_frac", "logp_gap", "rows", "train_s", "latency_s", "reward"];

/** Pixels of the markers' colour (markers.ts MARK_COLOR, #b00020) in the columns of a plot's canvas a marker at `x`
 *  covers (its line is 2 pixels wide, on x − 1 and x; at an edge of the plot one of them is clipped): what is drawn,
 *  not what the page says it drew. */
function markerPixels(page: Page, chart: string, x: number): Promise<number> {
  return page.evaluate(([id, at]) => {
    const canvas = document.querySelector(`#chart-${id} canvas`) as HTMLCanvasElement;
    const ctx = canvas.getContext("2d") as CanvasRenderingContext2D;
    const column = (col: number) => {
      const data = ctx.getImageData(col, 0, 1, canvas.height).data;
      let n = 0;
      for (let i = 0; i < data.length; i += 4) if (data[i] === 0xb0 && data[i + 1] === 0 && data[i + 2] === 0x20) n++;
      return n;
    };
    return Math.max(column(at - 1), column(at));
  }, [chart, x] as const);
}

/** Waits until every per-round plot drew a marker at each of `rounds` (and at no other), then checks the canvas. */
async function expectMarkers(page: Page, rounds: number[]): Promise<void> {
  await page.waitForFunction(([charts, want]) => charts.every((c) => JSON.stringify((window.rlloopUi.marks()[c] ?? []).map((m) => m.round)) === JSON.stringify(want)),
    [ROUND_CHARTS, rounds] as const);
  const drawn = await marks(page);
  for (const chart of ROUND_CHARTS) {
    for (const mark of drawn[chart] ?? []) expect(await markerPixels(page, chart, mark.x), `${chart}: the marker at round ${mark.round}`).toBeGreaterThan(50);
  }
}

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
  let config: string;

  /** Rollouts served by the adapter served now (the newest, unless a rollback went back) that close round `round`
   *  (4 rollouts of 2 steps = round.rows), then its announcement. */
  async function playRound(round: number, adapterRound = round - 1): Promise<void> {
    const rollouts = await Promise.all([0, 1, 2, 3].map(() => makeRollout("ui", next++, { steps: 2, adapterRound })));
    published.push(...rollouts);
    await publishRollouts(env.js, rollouts);
    await waitFor(`round ${round} published`, async () => (await eventsOn<{ round: number }>(env.jsm, subjects(POLICY).adapters)).some((a) => a.round === round));
  }

  const committedStats = (round: number): PpoStats => decodeStats(readFileSync(join(roundDir(env.workDir, POLICY, round), "adapter", "stats.json"), "utf8"));

  beforeAll(async () => {
    await buildUi();
    env = await startLoopEnv();
    config = env.writeConfig();
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

  test("ui - an operator's rollback shows in the Rollbacks table, marks the plots and moves the serving adapter", async () => {
    expect(await page.locator("#rollbacks-empty").isVisible()).toBe(true);
    const done = await execa(process.execPath, cliArgs("rollback", "--config", config, "--to-round", "2", "--reason", "test: r3 and r4 drop objects"), { cwd: REPO });
    const event = JSON.parse(done.stdout) as AdapterRolledBack;
    expect(event).toMatchObject({ seq: 1, trigger: "manual", round: 2, from: { round: 4 }, committed_round: 4 });
    const row = page.locator('#rollbacks-body tr[data-seq="1"]');
    await row.waitFor();
    expect(await row.locator("td").allTextContents()).toEqual([
      expect.stringMatching(/UTC$/), "manual", "r4 → r2", "–", "4", "none: an operator's rollback", "test: r3 and r4 drop objects",
    ]);
    expect(await row.locator("td.move").getAttribute("title")).toBe(`now serving bt-r2 (sha256 ${event.sha256})`);
    expect(await page.locator("#rollbacks-empty").isHidden()).toBe(true);
    // the serving adapter is the target wherever the page names it: the card, the adapter table, the replicas
    await expect.poll(() => page.locator("#card-adapter").textContent(), { timeout: 10_000 }).toBe("r2");
    expect(await page.locator("#card-adapter-detail").textContent()).toBe(`${event.sha256.slice(0, 12)} · rolled back from r4 (#1, manual)`);
    await expect.poll(() => page.locator('#adapters-body tr[data-round="2"] td.served').textContent(), { timeout: 10_000 }).toBe("serving now · target of #1");
    expect(await page.locator('#adapters-body tr[data-round="4"] td.served').textContent()).toBe("rolled back #1 → r2");
    expect(await page.locator('#adapters-body tr[data-round="4"]').getAttribute("data-rolled-back")).toBe("");
    // no reloader runs here: the replica that loaded r4 still serves it, and the page says it is not the loop's
    expect(await page.locator('#replicas-body tr[data-replica="http://gpu1:8000"] td.serving').textContent()).toBe("bt-r4 · the loop serves bt-r2");
    await expectMarkers(page, [4]);
    expect(await page.locator("#chart-pg_loss .mark-key").isVisible()).toBe(true);
    expect(await page.locator("#summary-kl").textContent()).toContain("Rollback at round 4 (#1).");
    expect(errors).toEqual([]);
  });

  test("ui - a screenshot after a few rounds (docs/ui.png)", async () => {
    // round 5 is served by the rollback's target and continues it; round 6 by round 5's adapter
    await playRound(5, 2);
    await playRound(6, 5);
    // settled: the daemon's stats say round 6 is committed and it is buffering again
    await page.waitForFunction(() => window.rlloopUi.view()?.live.committedRound === 6 && window.rlloopUi.view()?.live.phase === "intake");
    await expectMarkers(page, [4]);
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    expect(errors).toEqual([]);
  });

  test("ui - a monitor started after the rollback still shows it", async () => {
    const late = await spawnUi(["--config", config, "--port", "0"]);
    try {
      const { page: second, errors: secondErrors } = await browser.page({ width: 1400, height: 1000 });
      await second.goto(late.url);
      await second.waitForFunction(() => window.rlloopUi?.ready === true && window.rlloopUi.view()?.caughtUp === true);
      const row = second.locator('#rollbacks-body tr[data-seq="1"]');
      await row.waitFor();
      expect(await row.locator("td.move").textContent()).toBe("r4 → r2");
      await expectMarkers(second, [4]);
      // the loop has moved on since: round 6's adapter is served, the rollback's target is only that
      await expect.poll(() => second.locator("#card-adapter").textContent(), { timeout: 10_000 }).toBe("r6");
      expect(await second.locator('#adapters-body tr[data-round="2"] td.served').textContent()).toBe("target of #1");
      expect(await second.locator('#adapters-body tr[data-round="6"] td.served').textContent()).toBe("serving now");
      expect(secondErrors).toEqual([]);
      await second.close();
    } finally {
      await stopChild(late.child);
    }
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

  test("ui - the guard's rollback with its evidence; a duplicate, rounds never seen and many rollbacks", async () => {
    const js = env.js;
    const publish = (event: { type: string }) => js.publish(eventSubject(POLICY, event.type), JSON.stringify(event, statsReplacer));
    const at = new Date().toISOString();
    const sha = (n: number) => n.toString(16).padStart(2, "0").repeat(32);
    const stats: PpoStats = { pg_loss: -0.01, kl: 0.001, clip_frac: 0, logp_gap: 0.001, logp_gap_abs: 0.002, rows: 8, train_s: 1 };
    for (const round of [1, 2, 3, 4, 5]) {
      await publish({ type: "round.trained", policy: POLICY, round, at, stats: { ...stats, kl: 0.001 * round } } as never);
      await publish({ type: "adapter.published", policy: POLICY, round, name: `${POLICY}-r${round}`, path: `/a/${round}`, object: `${POLICY}/r${round}`, bucket: "rlloop-adapters", sha256: sha(round), files: [], stats, at } as never);
      // what the reward plot reads of a rollout: the regressed r3 and r4 do worse
      await js.publish(subjects(POLICY).rollouts, JSON.stringify({ id: `hw-${round}`, policy: POLICY, adapter: { round, name: `${POLICY}-r${round}` }, reward: round === 3 || round === 4 ? 0.25 : 0.85, steps: [] }));
    }
    const rollback = (seq: number, over: Partial<AdapterRolledBack> = {}): AdapterRolledBack => ({
      type: "adapter.rolled_back", policy: POLICY, seq, trigger: "guard", round: 2, name: `${POLICY}-r2`, object: `${POLICY}/r2`, bucket: "rlloop-adapters",
      sha256: sha(2), files: [], from: { round: 4, name: `${POLICY}-r4` }, regressed: 3, reason: "the guard: r3 worse than r2 on the robots",
      evidence: {
        test: "unpaired", alpha: 0.05, min_effect: 0.05, candidate: { round: 3, count: 96, mean: 0.25, bound: 0.31 }, baseline: { round: 2, count: 192, mean: 0.85, bound: 0.8 },
        pairs: null, difference_upper: -0.49,
      },
      committed_round: 5, at, ...over,
    });
    // round 5's commit found r3 worse and trained again from r2: round 5's adapter is served (the state record)
    const kv = await new Kvm(env.nc).create(STATE_BUCKET, { history: 8 });
    await kv.put(stateKey(POLICY), JSON.stringify({
      version: 2, policy: POLICY, round: 5, outcome: "published", adapter: { round: 5, path: "/a/5", sha256: sha(5) }, reference: { path: "/ref", sha256: null },
      last_seq: 1, ack_floor: 1, recent_adapters: [], at,
    }));
    await publish(rollback(1));
    server = await startUiServer({ store: source.store, port: 0 });
    const { page, errors } = await browser.page();
    await page.goto(server.url);
    await page.waitForFunction(() => window.rlloopUi?.ready === true);
    const row = page.locator('#rollbacks-body tr[data-seq="1"]');
    await row.waitFor();
    expect(await row.locator("td.trigger").textContent()).toBe("guard");
    expect(await row.locator("td.regressed").textContent()).toBe("r3");
    expect(await row.locator("td.evidence").textContent()).toBe("unpaired test · r3: 96 rollouts, mean 0.2500, upper bound 0.3100 · r2: 192 rollouts, mean 0.8500, "
      + "lower bound 0.8000 · upper bound of r3 − r2: -0.4900 (a rollback needs < -0.0500) · α 0.0500");
    // the monitor opens the state bucket when it appears (it looks every 2 s)
    await expect.poll(() => page.locator("#card-adapter-detail").textContent(), { timeout: 10_000 }).toBe(`${sha(5).slice(0, 12)} · trained again from r2 after rollback #1`);
    expect(await page.locator('#adapters-body tr[data-round="3"] td.served').textContent()).toBe("found worse #1");
    await expectMarkers(page, [5]);

    // the adversary: the same seq again, rounds the page has never seen, and a flood
    await publish(rollback(1, { reason: "forged: the same seq again", committed_round: 2 }));
    await publish(rollback(2, { trigger: "manual", round: 77, name: `${POLICY}-r77`, from: { round: 400, name: `${POLICY}-r400` }, regressed: null, evidence: null, committed_round: 999 }));
    for (let seq = 3; seq <= 152; seq++) await publish(rollback(seq, { committed_round: 1 + (seq % 5) }));
    await page.locator('#rollbacks-body tr[data-seq="152"]').waitFor();
    expect(await page.locator("#rollbacks-caption").textContent()).toBe("Rollbacks (newest 100 of 152)");
    expect(await page.locator("#rollbacks-body tr").count()).toBe(100);
    expect(await page.locator("#rollbacks-body tr").first().getAttribute("data-seq")).toBe("152");
    const v = await view(page);
    expect(v?.rollbacks.filter((r) => r.seq === 1).map((r) => [r.reason, r.committedRound])).toEqual([["the guard: r3 worse than r2 on the robots", 5]]);
    expect(v?.rollbacks.find((r) => r.seq === 2)).toMatchObject({ fromRound: 400, toRound: 77, committedRound: 999 });
    // one marker per round that committed rollbacks, none at round 999, and no axis stretched to reach it
    await expectMarkers(page, [1, 2, 3, 4, 5]);
    expect((await plotted(page)).kl?.x).toEqual([1, 2, 3, 4, 5]);
    expect(v?.adapters.map((a) => a.round)).toEqual([1, 2, 3, 4, 5]);
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
