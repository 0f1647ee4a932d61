// The always-on loop (DESIGN.md data flow 1-10): wires connection, state, recovery, admission, the round runner
// and observability, and owns the lifecycle — start, the intake loop with backpressure, round triggers, graceful
// stop (SIGTERM: stop pulling, finish the running round, nak the open round for immediate redelivery, drain).
// Only cli.ts decides the exit code: a fatal error (another daemon moved the state) resolves `closed` with it.
import type { Server } from "node:http";
import { access } from "node:fs/promises";
import { join } from "node:path";
import type { JsMsg } from "@nats-io/jetstream";
import { Objm, type ObjectStore } from "@nats-io/obj";
import type { Service } from "@nats-io/services";
import type { Logger } from "pino";
import { logger, setLogLevel } from "../log.js";
import { Admission } from "./admission.js";
import { RecentSeqs } from "./applied.js";
import { configHash, redactedConfig, type Config } from "./config.js";
import { connectNats, ensureStreams, type Nats } from "./connection.js";
import { setPhase, type Buffered, type LoopContext } from "./context.js";
import { ConfigError } from "./errors.js";
import { EventPublisher } from "./events.js";
import { sha256File } from "../files.js";
import { HeldMessages } from "./held.js";
import { Intake } from "./intake.js";
import { readManifest, type Manifest } from "./manifest.js";
import { Metrics, serveMetrics } from "./metrics.js";
import { startOwnServer, type OwnServer } from "./nats-server.js";
import { roundDir } from "./paths.js";
import { openAdapterStore } from "./publish.js";
import { recover, roundNumbers } from "./recovery.js";
import { RoundBuffer } from "./rounds.js";
import { RoundRunner } from "./round-runner.js";
import { PpoStats, type RoundSummary, type StatsEvent } from "./schema.js";
import { startService } from "./service.js";
import { StateStore, type StateRecord, type VersionedState } from "./state.js";
import { statsEvent, StatsTicker } from "./stats.js";
import { ResidentRoundTrainer } from "./resident-trainer.js";
import { CliRoundTrainer, readTrainerOutput, type RoundTrainer } from "./trainer.js";

/** Messages judged at once: frames decode on libuv's pool while the next message is parsed. */
const ADMIT_CONCURRENCY = 4;

export interface DaemonOptions {
  config: Config;
  /** default: the resident trainer (trainer.resident, no trainer.command), else CliRoundTrainer */
  trainer?: RoundTrainer;
}

export class Daemon {
  readonly config: Config;
  readonly log: Logger;
  readonly startedAt = Date.now();
  /** bound port of /metrics (null when off or not started) */
  metricsPort: number | null = null;
  natsUrl: string | null = null;
  #ctx: LoopContext | null = null;
  #trainer: RoundTrainer;
  #ownServer: OwnServer | null = null;
  #intake: Intake | null = null;
  #runner: RoundRunner | null = null;
  #admission: Admission | null = null;
  #service: Service | null = null;
  #http: Server | null = null;
  #ticker: StatsTicker | null = null;
  #triggerTimer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  #trainingRound: number | null = null;
  #nextRound = 1;
  #inflight = 0;
  #wake: (() => void) | null = null;
  #intakeLoop: Promise<void> | null = null;
  #connected = false;
  #opening = false;
  #stopRequested = false;
  #fatal: Error | null = null;
  #resolveClosed!: (err: Error | null) => void;
  /** resolves when the daemon stopped; with the fatal error when it stopped because of one */
  readonly closed: Promise<Error | null> = new Promise((r) => (this.#resolveClosed = r));

  constructor(options: DaemonOptions) {
    this.config = options.config;
    // before any child logger exists: pino children take their parent's level when created
    setLogLevel(options.config.log.level);
    this.log = logger("daemon", { policy: options.config.policy.name });
    this.#trainer = options.trainer ?? roundTrainer(options.config.trainer);
  }

  /**
   * Connects, recovers and starts intake. A stop() that arrives meanwhile is held until the opening steps are done
   * (none of them can be interrupted halfway without leaving something half-open), then drains instead of starting
   * intake. Connecting waits for NATS as long as it takes; a second signal exits the CLI (cli.ts).
   */
  async start(): Promise<void> {
    this.#opening = true;
    let pending: Manifest | null;
    try {
      pending = await this.#open();
    } catch (err) {
      if (this.#stopRequested) this.#resolveClosed(err as Error); // a stop() waiting on a start that failed returns
      throw err;
    } finally {
      this.#opening = false;
    }
    if (this.#stopRequested) {
      this.log.info("stop requested while starting: draining before intake starts");
      return this.stop();
    }
    const ctx = this.#ctx!;
    this.#resumeWork(pending);
    setPhase(ctx, "intake");
    this.#intakeLoop = this.#runIntake();
    this.#triggerTimer = setInterval(() => this.#maybeClose(), 1000);
    this.log.debug({ config: redactedConfig(this.config), configHash: configHash(this.config) }, "configuration");
    this.log.info({ url: redactUrl(this.natsUrl ?? ""), round: ctx.state.record.round, pending: pending?.round ?? null, metricsPort: this.metricsPort }, "daemon started");
  }

  /** Everything start() does before intake: connection, streams, state, recovery, consumer, observability. */
  async #open(): Promise<Manifest | null> {
    const url = await this.#natsUrl();
    const nats = await connectNats(this.config.nats, url);
    this.natsUrl = url;
    this.#connected = true;
    void this.#watchConnection(nats);
    await ensureStreams(nats.jsm, this.config.stream);
    const states = await StateStore.open(nats.nc, this.config.policy.name, this.config.stream.replicas);
    const adapters = await openAdapterStore(nats.nc, this.config.stream.replicas);
    const state = (await states.read()) ?? (await this.#initialState());
    const recovered = await recover(this.config.workDir, state.record, this.config.intake.dedupRounds, this.log);
    const ctx = this.#context(nats, state, recovered.applied);
    this.#ctx = ctx;
    this.#nextRound = state.record.round + 1 + (recovered.pending ? 1 : 0);
    this.#intake = new Intake(nats.js, nats.jsm, {
      policy: ctx.policy, consumer: this.config.consumer, round: this.config.round, startSeq: () => ctx.ackFloor + 1,
    }, logger("intake", { policy: ctx.policy }));
    this.#runner = new RoundRunner({ ctx, trainer: this.#trainer, states, adapters, ackFloor: () => this.#intake?.ackFloor() ?? Promise.resolve(null) });
    this.#admission = new Admission(ctx, this.#frameObjects(nats), () => this.#nextRound);
    await this.#startObservability(ctx);
    await this.#intake.ensureConsumer();
    return recovered.pending;
  }

  /** Graceful stop; idempotent. During start(), it takes effect as soon as the opening steps are done. */
  async stop(): Promise<void> {
    if (this.#opening) {
      this.#stopRequested = true;
      return void (await this.closed);
    }
    const ctx = this.#ctx;
    if (!ctx || ctx.stopping) return void (await this.closed);
    ctx.stopping = true;
    setPhase(ctx, "draining");
    this.log.info("draining");
    if (this.#triggerTimer) clearInterval(this.#triggerTimer);
    await this.#intake?.stop();
    this.#wake?.();
    await this.#intakeLoop;
    while (this.#inflight > 0) await new Promise((r) => setTimeout(r, 20));
    await this.#running?.catch(() => {});
    // the open round was never committed: hand its messages back for immediate redelivery
    ctx.held.nak([...ctx.buffer.entries()].map((e) => e.seq));
    ctx.held.release();
    this.#ticker?.stop();
    await this.#service?.stop().catch(() => {});
    await new Promise<void>((r) => (this.#http ? this.#http.close(() => r()) : r()));
    await this.#trainer.close();
    await ctx.nats.nc.drain().catch(() => {});
    await this.#ownServer?.stop();
    setPhase(ctx, "stopped");
    this.log.info("stopped");
    this.#resolveClosed(this.#fatal);
  }

  // -------------------------------------------------------------------------------------------------------------
  // startup

  async #natsUrl(): Promise<string> {
    if (this.config.nats.url !== null) return this.config.nats.url;
    this.#ownServer = await startOwnServer(this.config, logger("nats-server"));
    return this.#ownServer.url;
  }

  async #initialState(): Promise<VersionedState> {
    const initial = this.config.adapter.initial;
    if (initial === null) throw new ConfigError("'adapter.initial' must name the initial (SFT) adapter dir: round 1 continues it and it is the default reference, got null");
    const reference = this.config.adapter.reference ?? initial;
    const record: StateRecord = {
      version: 1, policy: this.config.policy.name, round: 0, outcome: "initial",
      adapter: { round: 0, path: initial, sha256: await optionalSha(initial) },
      reference: { path: reference, sha256: await optionalSha(reference) },
      lastSeq: 0, ackFloor: 0, recentAdapters: [], at: new Date().toISOString(),
    };
    record.recentAdapters = [{ round: 0, sha256: record.adapter.sha256 }];
    return { record, revision: 0 };
  }

  #context(nats: Nats, state: VersionedState, applied: LoopContext["applied"]): LoopContext {
    const policy = this.config.policy.name;
    const log = logger("loop", { policy });
    return {
      config: this.config, policy, log, nats,
      events: new EventPublisher(nats.nc, nats.js, policy, log),
      metrics: new Metrics(),
      held: new HeldMessages(this.config.consumer.ackWaitS, log),
      buffer: new RoundBuffer<Buffered>(),
      applied,
      rejectedSeqs: new RecentSeqs(100_000),
      reserved: new Map(),
      state,
      ackFloor: state.record.ackFloor,
      tally: { acceptedRows: 0, rejected: 0, last: null, gpuMemory: null },
      phase: "starting",
      stopping: false,
    };
  }

  #frameObjects(nats: Nats): () => Promise<ObjectStore> {
    let store: Promise<ObjectStore> | null = null;
    return () => (store ??= new Objm(nats.nc).open(this.config.frames.objectBucket).catch((err: unknown) => {
      store = null;
      throw err;
    }));
  }

  async #startObservability(ctx: LoopContext) {
    ctx.metrics.committedRound.set(ctx.state.record.round);
    this.#service = await startService(ctx.nats.nc, ctx.policy, { snapshot: () => this.snapshot(), rounds: (n) => this.rounds(n) }, logger("service"));
    if (this.config.observe.metricsPort !== null) {
      const { server, port } = await serveMetrics(ctx.metrics, { healthy: () => this.#health() }, this.config.observe.metricsHost, this.config.observe.metricsPort);
      this.#http = server;
      this.metricsPort = port;
    }
    this.#ticker = new StatsTicker(ctx, () => this.snapshot(), async () => {
      const floor = await this.#intake?.ackFloor();
      if (floor != null) ctx.ackFloor = Math.max(ctx.ackFloor, floor);
    });
  }

  /** First job: the pending round of a killed daemon, or the publish a killed daemon did not finish. */
  #resumeWork(pending: Awaited<ReturnType<typeof recover>>["pending"]) {
    const ctx = this.#ctx as LoopContext;
    const runner = this.#runner as RoundRunner;
    const record = ctx.state.record;
    if (pending) {
      for (const e of pending.events) ctx.reserved.set(e.seq, e.id);
      this.#startJob(pending.round, async () => {
        if (record.outcome === "published") await this.#republish(record);
        await runner.run(pending);
      });
    } else if (record.outcome === "published") {
      this.#startJob(null, () => this.#republish(record));
    }
  }

  async #republish(record: StateRecord) {
    const stats = await readTrainerOutput(record.adapter.path).catch(async () => (await readManifest(roundDir(this.config.workDir, record.policy, record.round)))?.stats ?? null);
    await (this.#runner as RoundRunner).publish(record.round, record.adapter.path, PpoStats.parse(stats ?? {}));
  }

  // -------------------------------------------------------------------------------------------------------------
  // intake and rounds

  async #runIntake(): Promise<void> {
    const intake = this.#intake as Intake;
    for await (const msg of intake.messages()) {
      if (this.#ctx?.stopping) break;
      await this.#capacity();
      this.#inflight++;
      void this.#admit(msg);
    }
  }

  async #admit(msg: JsMsg) {
    try {
      await (this.#admission as Admission).admit(msg);
    } finally {
      this.#inflight--;
      this.#maybeClose();
      this.#wake?.();
    }
  }

  /** Backpressure: wait while too many messages are being judged, or the open round is full and one trains. */
  async #capacity() {
    const ctx = this.#ctx as LoopContext;
    const full = () => this.#running !== null && ctx.buffer.trigger(Date.now(), this.config.round) !== null;
    while (!ctx.stopping && (this.#inflight >= ADMIT_CONCURRENCY || full())) {
      await new Promise<void>((r) => {
        this.#wake = r;
        setTimeout(r, 500);
      });
    }
  }

  #maybeClose() {
    const ctx = this.#ctx;
    if (!ctx || ctx.stopping || this.#running) return;
    const trigger = ctx.buffer.trigger(Date.now(), this.config.round);
    if (!trigger) return;
    const entries = ctx.buffer.take(trigger, this.config.round);
    const round = this.#nextRound++;
    for (const e of entries) ctx.reserved.set(e.seq, e.id);
    this.#startJob(round, () => (this.#runner as RoundRunner).runClosed(round, entries, trigger));
  }

  #startJob(round: number | null, job: () => Promise<void>) {
    const ctx = this.#ctx as LoopContext;
    this.#trainingRound = round;
    this.#running = job()
      .catch((err: unknown) => this.#onFatal(err as Error))
      .finally(() => {
        ctx.reserved.clear();
        this.#running = null;
        this.#trainingRound = null;
        if (!ctx.stopping) setPhase(ctx, "intake");
        this.#wake?.();
        this.#maybeClose();
      });
  }

  #onFatal(err: Error) {
    this.log.fatal({ err }, "round failed with an error the daemon cannot continue after");
    this.#fatal = err;
    void this.stop();
  }

  async #watchConnection(nats: Nats) {
    for await (const status of nats.nc.status()) {
      if (status.type === "disconnect") this.#connected = false;
      if (status.type === "reconnect") this.#connected = true;
      if (status.type === "disconnect" || status.type === "reconnect") this.log.warn({ nats: status.type }, "nats connection");
    }
  }

  // -------------------------------------------------------------------------------------------------------------
  // observability

  snapshot(): StatsEvent {
    const ctx = this.#ctx as LoopContext;
    return statsEvent(ctx, {
      openRound: this.#nextRound,
      trainingRound: this.#trainingRound,
      uptimeS: (Date.now() - this.startedAt) / 1000,
      rowsPerS: this.#ticker?.rate ?? 0,
    });
  }

  async rounds(limit: number): Promise<RoundSummary[]> {
    const numbers = (await roundNumbers(this.config.workDir, this.config.policy.name)).slice(-limit).reverse();
    const out: RoundSummary[] = [];
    for (const round of numbers) {
      const manifest = await readManifest(roundDir(this.config.workDir, this.config.policy.name, round)).catch(() => null);
      if (!manifest) continue;
      out.push({
        round, status: manifest.outcome ? `${manifest.status}:${manifest.outcome}` : manifest.status,
        rows: manifest.rows, rollouts: manifest.events.length, sha256: manifest.trainSha256, stats: manifest.stats ?? null,
      });
    }
    return out;
  }

  #health() {
    const ctx = this.#ctx;
    const ok = this.#connected && this.#fatal === null && ctx !== null && ctx.phase !== "stopped";
    return { ok, detail: { connected: this.#connected, phase: ctx?.phase ?? "starting", round: ctx?.state.record.round ?? null } };
  }
}

async function optionalSha(adapterDir: string): Promise<string | null> {
  const file = join(adapterDir, "adapter_model.safetensors");
  try {
    await access(file);
  } catch {
    return null;
  }
  return sha256File(file);
}

function redactUrl(url: string): string {
  return url.replace(/\/\/[^@/]*@/g, "//[redacted]@");
}

/** The trainer of the config: resident ranks keep the model loaded between rounds; a custom command runs per round. */
function roundTrainer(config: Config["trainer"]): RoundTrainer {
  if (config.command === null && config.resident) {
    return new ResidentRoundTrainer({ args: config.args, env: config.env, timeoutS: config.timeoutS });
  }
  return new CliRoundTrainer(config);
}
