// Web UI load bench: how fast the page opens on a long run's history, in headless Chromium, against the same page
// on an empty loop measured in the same run (the baseline: HTML, scripts, uPlot setup, the event stream, no data).
//   npx tsx bench/ui-load.ts [--rounds 5000] [--rejections 2000] [--rollouts 20000] [--replicas 4] [--loads 7]
// A real nats-server gets the history the daemon and the reloader would have written over --rounds rounds (each
// round's lifecycle events, its adapter announcement, replica loads for every 10th round; --rejections rejections;
// --rollouts rollouts for the reward plot), `rlloop ui`'s source reads it (timed: the server's catch-up) and its
// server serves it. Each load is a fresh page in one warm browser: navigation start → first snapshot drawn (every
// chart and table), as the page measures it (performance.now()), and as seen from outside (goto → ready). The
// first load of the browser is reported apart (cold). Not a test: nothing asserts a time.
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { jetstream, jetstreamManager, type JetStreamClient } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { eventSubject, statsReplacer, subjects } from "../src/contract/index.js";
import { ConfigSchema } from "../src/loop/config/index.js";
import { ensureStreams } from "../src/loop/connection.js";
import { spawnNatsServer } from "../src/loop/nats-server-process.js";
import { natsServerBinary } from "../src/setup-env.js";
import { buildUi } from "../src/tools/ui/build.js";
import type { UiSnapshot } from "../src/tools/ui/model.js";
import { decodeView } from "../src/tools/ui/view-codec.js";
import { startUiServer } from "../src/tools/ui/server.js";
import { startUiSource } from "../src/tools/ui/source.js";
import { launchBrowser, type TestBrowser } from "../test/helpers/browser.js";

const { values: args } = parseArgs({
  options: {
    rounds: { type: "string", default: "5000" },
    rejections: { type: "string", default: "2000" },
    rollouts: { type: "string", default: "20000" },
    replicas: { type: "string", default: "4" },
    loads: { type: "string", default: "7" },
  },
});
const ROUNDS = Number(args.rounds);
const REJECTIONS = Number(args.rejections);
const ROLLOUTS = Number(args.rollouts);
const REPLICAS = Number(args.replicas);
const LOADS = Number(args.loads);
const P = "bench";
const REASONS = ["code_length", "stale_adapter", "image_corrupt", "invalid_schema", "duplicate_id"];

/** Publishes with up to 512 acks outstanding (one at a time would time the network round trip, not the UI). */
class Publisher {
  readonly #pending: Promise<unknown>[] = [];
  count = 0;
  constructor(private readonly js: JetStreamClient) {}
  async event(event: { type: string }): Promise<void> {
    await this.raw(eventSubject(P, event.type), JSON.stringify(event, statsReplacer));
  }
  async raw(subject: string, data: string): Promise<void> {
    this.#pending.push(this.js.publish(subject, data));
    this.count++;
    if (this.#pending.length >= 512) await Promise.all(this.#pending.splice(0));
  }
  async done(): Promise<void> {
    await Promise.all(this.#pending.splice(0));
  }
}

/** A long run's history: statistics that drift and wobble as a real run's do, a gate refusal every 97 rounds. */
async function writeHistory(js: JetStreamClient): Promise<number> {
  const pub = new Publisher(js);
  const t0 = Date.now() - ROUNDS * 60_000;
  const at = (ms: number) => new Date(t0 + ms).toISOString();
  const sha = (n: number) => (n % 256).toString(16).padStart(2, "0").repeat(32);
  for (let round = 1; round <= ROUNDS; round++) {
    const base = { policy: P, round };
    const t = round * 60_000;
    const stats = {
      pg_loss: -0.02 * Math.exp(-round / 2000) + 0.004 * Math.sin(round / 7), kl: 0.002 + 0.01 * (1 - Math.exp(-round / 1500)) + 0.001 * Math.sin(round / 3),
      clip_frac: 0.03 + 0.01 * Math.sin(round / 11), logp_gap: 0.01 * Math.cos(round / 13), logp_gap_abs: 0.02 + 0.005 * Math.sin(round / 5),
      rows: 256, train_s: 23 + 2 * Math.sin(round / 17),
    };
    const refused = round % 97 === 0;
    await pub.event({ type: "round.closed", ...base, at: at(t), trigger: "rows", rows: 256, rollouts: 64 } as never);
    await pub.event({ type: "round.assembled", ...base, at: at(t + 500), rows: 256, sha256: sha(round), dir: `/runs/${round}` } as never);
    await pub.event({ type: "round.training", ...base, at: at(t + 1000), attempt: 1 } as never);
    await pub.event({ type: "round.trained", ...base, at: at(t + 25_000), stats } as never);
    if (refused) await pub.event({ type: "round.rejected", ...base, at: at(t + 25_000), reason: "kl 0.3 > gate.maxKl 0.2", stats } as never);
    await pub.event({ type: "round.committed", ...base, at: at(t + 26_000), outcome: refused ? "rejected" : "published", revision: round + 1 } as never);
    if (refused) continue;
    await pub.event({ type: "round.published", ...base, at: at(t + 28_000), name: `${P}-r${round}` } as never);
    await pub.event({
      type: "adapter.published", ...base, name: `${P}-r${round}`, path: `/runs/${round}/adapter`, object: `${P}/r${round}`, bucket: "rlloop-adapters", sha256: sha(round),
      files: [{ name: "adapter_model.safetensors", object: `${P}/r${round}/adapter_model.safetensors`, sha256: sha(round), size: 123_456_789 }], stats, at: at(t + 28_000),
    } as never);
    if (round % 10 === 0 || round === ROUNDS) {
      for (let r = 0; r < REPLICAS; r++) {
        await pub.event({ type: "replica.loaded", policy: P, replica: `http://gpu${r}:8000`, name: `${P}-r${round}`, at: at(t + 30_000 + r) } as never);
      }
    }
  }
  for (let i = 0; i < REJECTIONS; i++) {
    const reason = REASONS[i % REASONS.length] as string;
    await pub.event({ type: "rollout.rejected", policy: P, seq: i + 1, id: `w-${i}`, reason, message: `${reason}: case ${i}`, at: at(Math.floor((i / REJECTIONS) * ROUNDS * 60_000)) } as never);
  }
  for (let i = 0; i < ROLLOUTS; i++) {
    const round = Math.floor((i / ROLLOUTS) * ROUNDS);
    await pub.raw(subjects(P).rollouts, JSON.stringify({ id: `w-${i}`, policy: P, adapter: { round, name: `${P}-r${round}` }, reward: 0.3 + 0.5 * (round / ROUNDS) + 0.1 * Math.sin(i), steps: [] }));
  }
  await pub.done();
  return pub.count;
}

interface Load {
  inPageMs: number;
  outsideMs: number;
  /** navigation start → the snapshot's arrival, its decoding, the end of drawing it */
  receivedMs: number;
  decodedMs: number;
}

async function load(browser: TestBrowser, url: string): Promise<Load> {
  const { page, errors } = await browser.page({ width: 1400, height: 1000 });
  const started = performance.now();
  await page.goto(url);
  await page.waitForFunction(() => window.rlloopUi?.ready === true, undefined, { polling: "raf" });
  const outsideMs = performance.now() - started;
  const marks = await page.evaluate(() => ({
    drawn: window.rlloopUi.firstDrawMs ?? Number.NaN,
    received: performance.getEntriesByName("rlloop:snapshot-received")[0]?.startTime ?? Number.NaN,
    decoded: performance.getEntriesByName("rlloop:snapshot-decoded")[0]?.startTime ?? Number.NaN,
  }));
  await page.close();
  if (errors.length > 0) throw new Error(`the page logged errors: ${errors.join("; ")}`);
  return { inPageMs: marks.drawn, outsideMs, receivedMs: marks.received, decodedMs: marks.decoded };
}

const median = (xs: number[]) => {
  const s = xs.slice().sort((a, b) => a - b);
  return s.length % 2 ? (s[(s.length - 1) / 2] as number) : ((s[s.length / 2 - 1] as number) + (s[s.length / 2] as number)) / 2;
};

async function measure(browser: TestBrowser, url: string): Promise<{ cold: Load; warm: Load[] }> {
  const cold = await load(browser, url);
  const warm: Load[] = [];
  for (let i = 0; i < LOADS; i++) warm.push(await load(browser, url));
  return { cold, warm };
}

async function main() {
  await buildUi();
  const store = mkdtempSync(join(tmpdir(), "rlloop-ui-bench-"));
  const server = await spawnNatsServer({ bin: natsServerBinary(), host: "127.0.0.1", port: 0, store });
  const nats = server.child;
  const url = server.url;
  const nc = await connect({ servers: url });
  let browser: TestBrowser | null = null;
  try {
    await ensureStreams(await jetstreamManager(nc), ConfigSchema.parse({}).stream);
    const wroteStarted = performance.now();
    const messages = await writeHistory(jetstream(nc));
    const wroteMs = performance.now() - wroteStarted;

    // baseline: the same page on a policy with no history
    const empty = await startUiSource(nc, { policy: "empty", source: url, requestTimeoutMs: 200, rewardHistory: ROLLOUTS });
    await empty.caughtUp;
    const emptyServer = await startUiServer({ store: empty.store, port: 0 });

    const readStarted = performance.now();
    const source = await startUiSource(nc, { policy: P, source: url, requestTimeoutMs: 200, rewardHistory: ROLLOUTS });
    await source.caughtUp;
    const readMs = performance.now() - readStarted;
    const server = await startUiServer({ store: source.store, port: 0 });
    const snapshot = await (await fetch(`${server.url}api/snapshot`)).text();
    const snap = decodeView<UiSnapshot>(snapshot);

    browser = await launchBrowser();
    const base = await measure(browser, emptyServer.url);
    const full = await measure(browser, server.url);
    const m = (loads: Load[], key: keyof Load) => median(loads.map((l) => l[key]));
    const report = {
      machine: { cpus: cpus().length, cpu: cpus()[0]?.model, node: process.version },
      history: { rounds: snap.rounds.length, adapters: snap.adapters.length, rejections: snap.rejections.length, rewardRounds: snap.rewards.length, messages },
      writeHistoryS: +(wroteMs / 1000).toFixed(2),
      sourceCatchUpS: +(readMs / 1000).toFixed(2),
      snapshotBytes: snapshot.length,
      baseline: {
        coldMs: +base.cold.inPageMs.toFixed(0), warmInPageMedianMs: +m(base.warm, "inPageMs").toFixed(0), warmOutsideMedianMs: +m(base.warm, "outsideMs").toFixed(0),
        warmSnapshotReceivedMedianMs: +m(base.warm, "receivedMs").toFixed(0),
      },
      full: {
        coldMs: +full.cold.inPageMs.toFixed(0), warmInPageMedianMs: +m(full.warm, "inPageMs").toFixed(0), warmOutsideMedianMs: +m(full.warm, "outsideMs").toFixed(0),
        warmSnapshotReceivedMedianMs: +m(full.warm, "receivedMs").toFixed(0), warmSnapshotDecodedMedianMs: +m(full.warm, "decodedMs").toFixed(0),
        warmInPageMs: full.warm.map((l) => +l.inPageMs.toFixed(0)),
      },
      ratioWarmInPage: +(m(full.warm, "inPageMs") / m(base.warm, "inPageMs")).toFixed(2),
    };
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    await server.close();
    await emptyServer.close();
    await source.stop();
    await empty.stop();
  } finally {
    await browser?.close();
    await nc.close();
    nats.kill("SIGTERM");
    await new Promise((r) => nats.once("exit", r));
    rmSync(store, { recursive: true, force: true });
  }
}

await main();
