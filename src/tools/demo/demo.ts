// `rlloop demo`: the whole loop at toy size on the CPU, in one process tree — an embedded nats-server, a tiny
// random Qwen3.5 with a random starting adapter (scripts/demo_model.py, run by the setup's Python), the simulator
// publishing rollouts served by the newest adapter, and the daemon training a real PPO round per batch with
// `rlloop train ppo` and publishing each adapter. It waits for every round's announcement and prints a summary.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Logger } from "pino";
import { adapterName, AdapterPublished, decodeWithNonFinite, subjects } from "../../contract/index.js";
import { logger } from "../../log.js";
import { PACKAGE_ROOT, parseConfig, type Config } from "../../loop/config/index.js";
import { connectNats, type Nats } from "../../loop/connection.js";
import { Daemon } from "../../loop/daemon.js";
import { publishRollouts, type SimulateOptions } from "../sim/publisher.js";
import { venvPython } from "../../setup-env.js";

export interface DemoOptions {
  rounds: number;
  rowsPerRound: number;
  workDir: string;
  seed: number;
  /** wait at most this long for one round's adapter */
  roundTimeoutS: number;
}

/** What the demo reports while it runs (its progress view). */
export interface DemoProgress {
  stage(text: string): void;
  round(round: DemoRound, seconds: number): void;
}

export interface DemoRound {
  round: number;
  rows: number;
  name: string;
  sha256: string;
  pgLoss: number;
  kl: number;
  clipFrac: number;
  logpGap: number;
}

/** The demo's policy name (its subjects are rlloop.demo.*). */
export const DEMO_POLICY = "demo";
const POLICY = DEMO_POLICY;
const CODE_LENGTH = 3; // the tiny tokenizer's digits are single tokens like Qwen's; 3 keeps CPU rounds short
const CHAT_TEMPLATE = join(PACKAGE_ROOT, "config", "qwen3.5-chat-template.jinja");

export async function runDemo(opts: DemoOptions, progress: DemoProgress = { stage: () => {}, round: () => {} }): Promise<DemoRound[]> {
  const log = logger("demo");
  const work = resolve(opts.workDir);
  const files = makeModel(work, log, progress);
  // A demo is a fresh loop each run: the daemon would otherwise resume an earlier run's rounds and streams, and
  // the simulated workers, serving round 0's adapter, would wait for a round 1 that is long committed.
  rmSync(join(work, "loop"), { recursive: true, force: true });
  const config = demoConfig(work, files, opts);
  progress.stage("starting nats-server, the daemon and its resident trainer (the probe job trains first)");
  const daemon = new Daemon({ config });
  await daemon.start();
  progress.stage(`loop ready: simulated workers publish ${opts.rowsPerRound} rows per round, served by the newest adapter`);
  const nats = await connectNats(config.nats, daemon.natsUrl ?? "");
  try {
    return await playRounds(nats, opts, log, progress);
  } finally {
    await nats.nc.drain().catch(() => {});
    await daemon.stop();
  }
}

/** The tiny model folder and starting adapter, made once per work dir by the setup's Python. */
function makeModel(work: string, log: Logger, progress: DemoProgress): { model: string; adapter: string } {
  const files = { model: join(work, "model-files", "model"), adapter: join(work, "model-files", "sft") };
  if (existsSync(join(files.adapter, "adapter_config.json"))) {
    progress.stage(`tiny random Qwen3.5 and starting adapter: ${join(work, "model-files")} (kept from an earlier run)`);
    return files;
  }
  mkdirSync(work, { recursive: true });
  progress.stage(`generating a tiny random Qwen3.5 and a starting LoRA adapter in ${join(work, "model-files")} (once)`);
  log.info({ dir: join(work, "model-files") }, "generating a tiny random Qwen3.5 and a starting LoRA adapter");
  // its progress bars and warnings belong to the log, not to the demo's view; they are shown when it fails
  const run = spawnSync(venvPython(), [join(PACKAGE_ROOT, "scripts", "demo_model.py"), CHAT_TEMPLATE, join(work, "model-files")], {
    stdio: ["ignore", "ignore", "pipe"], encoding: "utf8",
  });
  log.debug({ stderr: run.stderr }, "tiny model generation");
  if (run.status !== 0) {
    throw new Error(`scripts/demo_model.py failed (${run.error?.message ?? `exit ${run.status}`}):\n${(run.stderr ?? "").split("\n").slice(-20).join("\n")}`);
  }
  return files;
}

function demoConfig(work: string, files: { model: string; adapter: string }, opts: DemoOptions): Config {
  return parseConfig({
    workDir: join(work, "loop"),
    policy: { name: POLICY, codeLength: CODE_LENGTH, maxSteps: 4 },
    round: { rows: opts.rowsPerRound, minRows: 1, maxWaitS: 600 },
    adapter: { initial: files.adapter, reference: files.adapter },
    trainer: { model: files.model, device: "cpu", batch: 4, seed: opts.seed },
    observe: { statsIntervalS: 5, metricsPort: null },
  });
}

/** Per round: publish just enough rollouts served by the newest adapter to close it, then wait for its adapter. */
async function playRounds(nats: Nats, opts: DemoOptions, log: Logger, progress: DemoProgress): Promise<DemoRound[]> {
  const announcements = nats.nc.subscribe(subjects(POLICY).adapterPublished);
  const iterator = announcements[Symbol.asyncIterator]();
  const done: DemoRound[] = [];
  let next = 0;
  for (let round = 1; round <= opts.rounds; round++) {
    const served = round - 1;
    let rows = 0;
    const started = performance.now();
    while (rows < opts.rowsPerRound) {
      const summary = await publishRollouts(nats.js, simulation(opts, served, next++));
      rows += summary.rows;
    }
    log.info({ round, rows }, "rollouts published; waiting for the round's adapter");
    const published = await nextAnnouncement(iterator, opts.roundTimeoutS, round);
    done.push(summarise(published));
    log.info(done.at(-1), "adapter published");
    progress.round(done.at(-1) as DemoRound, (performance.now() - started) / 1000);
  }
  announcements.unsubscribe();
  return done;
}

function simulation(opts: DemoOptions, servedRound: number, index: number): SimulateOptions {
  return {
    policy: POLICY, seed: opts.seed, groupSize: 4, maxSteps: 2, codeLength: CODE_LENGTH, levels: 10,
    frame: { width: 96, height: 64 }, adapter: { round: servedRound, name: adapterName(POLICY, servedRound) },
    skill: { base: 0.3, perRound: 0.1 }, memoryBits: 4, runTag: `demo-s${opts.seed}`,
    startMs: Date.now(), spacingMs: 0, count: 1, start: index, rate: null, frameRoot: null,
  };
}

async function nextAnnouncement(iterator: AsyncIterator<{ string(): string }>, timeoutS: number, round: number): Promise<AdapterPublished> {
  const timeout = new Promise<never>((_, reject) => {
    const timer = setTimeout(() => reject(new Error(`no adapter for round ${round} within ${timeoutS} s (see the demo's log)`)), timeoutS * 1000);
    timer.unref();
  });
  for (;;) {
    const next = await Promise.race([iterator.next(), timeout]);
    if (next.done) throw new Error("the NATS subscription closed before every round was published");
    const event = AdapterPublished.parse(decodeWithNonFinite(next.value.string()));
    if (event.round === round) return event;
  }
}

function summarise(a: AdapterPublished): DemoRound {
  return {
    round: a.round, rows: a.stats.rows, name: a.name, sha256: a.sha256.slice(0, 12),
    pgLoss: a.stats.pg_loss, kl: a.stats.kl, clipFrac: a.stats.clip_frac, logpGap: a.stats.logp_gap,
  };
}
