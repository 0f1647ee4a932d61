// The always-on loop (DESIGN.md data flow 1-10): wires connection, state, recovery, admission, the round runner
// and observability, and owns the lifecycle — start (checks first: nothing is pulled until the trainer has trained
// a probe job), the intake loop with backpressure, round triggers, graceful stop (SIGTERM: stop pulling, let the
// round in hand reach a safe point, nak the open round for immediate redelivery, drain).
// The CLI decides the exit code: a fatal error (another daemon moved the state) resolves `closed` with it.
import type { Server } from "node:http";
import { access, stat } from "node:fs/promises";
import { join } from "node:path";
import type { JsMsg } from "@nats-io/jetstream";
import type { Service } from "@nats-io/services";
import type { Logger } from "pino";
import type { AdapterRolledBack, RoundSummary, StatsEvent } from "../contract/index.js";
import { sha256File } from "../files.js";
import { logger, setLogLevel } from "../log.js";
import { checkAdapterDir } from "../train/job-inputs.js";
import { Admission } from "./admission.js";
import { RecentSeqs } from "./applied.js";
import { CliRoundTrainer } from "./cli-trainer.js";
import { configHash, redactedConfig, redactUrl, type Config } from "./config/index.js";
import { connectNats, ensureStreams, type Nats } from "./connection.js";
import { openAdapterBucket, openIdsBucket, openStateBucket } from "./buckets.js";
import { ConsumedIds } from "./consumed-ids.js";
import { adapterFolders, syncManifests } from "./continuation.js";
import { setPhase, type Buffered, type LoopContext } from "./context.js";
import { ConfigError, isStopRequested } from "./errors.js";
import { EventPublisher } from "./events.js";
import { frameObjectOpener } from "./frame-objects.js";
import { HeldMessages } from "./held.js";
import { Intake } from "./intake.js";
import { Lease } from "./lease.js";
import { readManifest, type Manifest } from "./manifest.js";
import { serveHttp, type Readiness } from "./http-server.js";
import { Metrics } from "./metrics.js";
import { startOwnServer, type OwnServer } from "./nats-server.js";
import { roundDir } from "./paths.js";
import { Probe } from "./probe.js";
import { recover, roundNumbers } from "./recovery.js";
import { ResidentRoundTrainer } from "./resident-trainer.js";
import { readRoundRollouts } from "./round-rollouts.js";
import { RoundBuffer } from "./rounds.js";
import { RoundRunner } from "./round-runner.js";
import { startService } from "./service.js";
import { StateStore, type StateRecord, type VersionedState } from "./state.js";
import { outcomeSummaries, statsEvent, StatsTicker } from "./stats.js";
import { verdictOf } from "./guard.js";
import { isRollbackRefused } from "./rollback.js";
import { readTrainerOutput, type RoundTrainer } from "./trainer.js";
import { lockWorkDir, type WorkDirLock } from "./work-dir-lock.js";

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
  #lock: WorkDirLock | null = null;
  #nats: Nats | null = null;
  #lease: Lease | null = null;
  #ownServer: OwnServer | null = null;
  #intake: Intake | null = null;
  #runner: RoundRunner | null = null;
  #admission: Admission | null = null;
  #service: Service | null = null;
  #http: Server | null = null;
  #ui: { stop(): Promise<void> } | null = null;
  #trainerReady = false;
  #ticker: StatsTicker | null = null;
  #triggerTimer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  #trainingRound: number | null = null;
  /** operators' rollbacks waiting for the next safe point between rounds */
  #rollbacks: RollbackRequest[] = [];
  #nextRound = 1;
  /** judgements in flight; `#idle` resolves when the count drops to zero */
  #inflight = 0;
  #idle: { promise: Promise<void>; resolve: () => void } | null = null;
  #wake: (() => void) | null = null;
  #intakeLoop: Promise<void> | null = null;
  #connected = false;
  #opening = false;
  #stopRequested = false;
  readonly #stopper = new AbortController();
  readonly #leaseWait = new AbortController();
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
   * Checks, connects, recovers and starts intake. A misconfiguration rejects (and leaves the stream untouched:
   * nothing is pulled before every check passed); everything opened so far is closed again, the own server too.
   * A stop() that arrives meanwhile is held until the opening steps are done, then drains instead of starting intake.
   */
  async start(): Promise<void> {
    this.#opening = true;
    let pending: Manifest | null;
    try {
      pending = await this.#open();
    } catch (err) {
      await this.#closeAfterFailedStart();
      // a standby stopped while it waited for the lease: a clean stop
      if (this.#stopRequested && isStopRequested(err)) return this.#resolveClosed(null);
      if (this.#stopRequested) this.#resolveClosed(err as Error); // a stop() waiting on a start that failed returns
      throw err;
    } finally {
      this.#opening = false;
    }
    if (this.#stopRequested) {
      this.log.info("stop requested while starting: draining before intake starts");
      return this.stop();
    }
    const ctx = this.#ctx as LoopContext;
    this.#resumeWork(pending);
    setPhase(ctx, "intake");
    this.#intakeLoop = this.#runIntake();
    this.#triggerTimer = setInterval(() => this.#maybeClose(), 1000);
    this.log.debug({ config: redactedConfig(this.config), configHash: configHash(this.config) }, "configuration");
    this.log.info({ url: redactUrl(this.natsUrl ?? ""), round: ctx.state.record.round, pending: pending?.round ?? null, metricsPort: this.metricsPort }, "daemon started");
  }

  /** Everything start() does before intake, checks first. */
  async #open(): Promise<Manifest | null> {
    this.#lock = await lockWorkDir(this.config.workDir);
    await this.#checkAdapterConfig();
    await this.#trainer.start();
    this.#trainerReady = true;
    const url = await this.#natsUrl();
    const nats = await connectNats(this.config.nats, url, { log: this.log });
    this.#nats = nats;
    this.natsUrl = url;
    this.#connected = true;
    void this.#watchConnection(nats);
    this.#checkPayloadLimits(nats);
    const buckets = { replicas: this.config.stream.replicas, log: this.log };
    const stateBucket = await openStateBucket(nats.nc, buckets);
    // a standby waits here, checked and with its trainer started, until the active daemon stops renewing the lease
    this.#lease = await Lease.acquire({
      kv: stateBucket, js: nats.js, policy: this.config.policy.name, ttlS: this.config.lease.ttlS, workDir: this.config.workDir,
      standby: this.config.lease.standby, signal: this.#leaseWait.signal, log: this.log, onLost: (err) => this.#onFatal(err),
    });
    await ensureStreams(nats.jsm, this.config.stream, this.log);
    const states = StateStore.of(stateBucket, this.config.policy.name);
    const adapters = await openAdapterBucket(nats.nc, buckets);
    const stored = await states.read();
    // the committed history and what the record names, on this disk: fetched when they are not (a daemon taking over
    // from another host); before anything reads the round folders
    if (stored) await syncManifests(adapters, stored.record, this.config.workDir, this.config.intake.dedupRounds, this.log);
    const state = stored ? { ...stored, record: await adapterFolders(adapters, stored.record, this.config.workDir, this.log) } : await this.#initialState();
    await this.#checkStateAdapters(state.record);
    const probe = new Probe(this.#trainer, this.config);
    if (this.config.trainer.probeAtStart) await this.#probeAtStart(probe, state.record);
    const consumedIds = ConsumedIds.of(await openIdsBucket(nats.nc, this.config.intake.duplicateWindowS, buckets), this.config.policy.name);
    const recovered = await recover(this.config.workDir, state.record, this.config.intake.dedupRounds, this.log);
    const ctx = this.#context(nats, state, recovered.applied, consumedIds);
    this.#ctx = ctx;
    this.#nextRound = state.record.round + 1 + (recovered.pending ? 1 : 0);
    this.#intake = new Intake(nats.js, nats.jsm, {
      policy: ctx.policy, consumer: this.config.consumer, round: this.config.round, startSeq: () => ctx.ackFloor + 1,
    }, logger("intake", { policy: ctx.policy }));
    this.#runner = new RoundRunner({
      ctx, trainer: this.#trainer, probe, states, adapters, lease: this.#lease,
      ackFloor: () => this.#intake?.ackFloor() ?? Promise.resolve(null),
      rollouts: (round, events) => readRoundRollouts(nats.jsm, round, events, "admitted"),
    });
    this.#admission = new Admission(ctx, frameObjectOpener(nats.nc, this.config.frames.objectBucket), () => this.#nextRound);
    await this.#startObservability(ctx);
    await this.#intake.ensureConsumer();
    return recovered.pending;
  }

  /** Graceful stop; idempotent. During start(), it takes effect as soon as the opening steps are done. */
  async stop(): Promise<void> {
    if (this.#opening) {
      this.#stopRequested = true;
      this.#leaseWait.abort(); // ends a standby's wait for the lease; any other opening step is waited for
      return void (await this.closed);
    }
    const ctx = this.#ctx;
    if (!ctx || ctx.stopping) return void (await this.closed);
    ctx.stopping = true;
    this.#stopper.abort();
    setPhase(ctx, "draining");
    this.log.info("draining");
    if (this.#triggerTimer) clearInterval(this.#triggerTimer);
    await this.#intake?.stop();
    this.#wake?.();
    await this.#intakeLoop;
    await this.#idle?.promise;
    await this.#running?.catch(() => {});
    // the open round was never committed: hand its messages back for immediate redelivery
    ctx.held.nak([...ctx.buffer.entries()].map((e) => e.seq));
    ctx.held.release();
    this.#ticker?.stop();
    await this.#service?.stop().catch(() => {});
    await this.#ui?.stop().catch(() => {});
    await new Promise<void>((r) => (this.#http ? this.#http.close(() => r()) : r()));
    await this.#trainer.close();
    await this.#lease?.release();
    await ctx.nats.nc.drain().catch(() => {});
    await this.#ownServer?.stop();
    await this.#lock?.release();
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

  /** What start() opened before it failed, closed in reverse order; a failure here must not hide the first one. */
  async #closeAfterFailedStart(): Promise<void> {
    await this.#service?.stop().catch(() => {});
    await this.#ui?.stop().catch(() => {});
    await new Promise<void>((r) => (this.#http ? this.#http.close(() => r()) : r()));
    this.#ctx?.held.release();
    this.#ticker?.stop();
    await this.#trainer.close().catch(() => {});
    await this.#lease?.release().catch(() => {});
    await this.#nats?.nc.close().catch(() => {});
    await this.#ownServer?.stop().catch(() => {});
    await this.#lock?.release().catch(() => {});
  }

  /** The configured frame roots, model and adapters exist before anything connects (the state record may later name others). */
  async #checkAdapterConfig(): Promise<void> {
    if (this.config.trainer.command === null && this.config.trainer.model === null) {
      throw new ConfigError("'trainer.model' must name the base model folder (a Hugging Face Qwen3.5 checkpoint), got null (or set 'trainer.command' to run a trainer of your own)");
    }
    for (const root of this.config.frames.roots) {
      const info = await stat(root).catch(() => null);
      if (!info?.isDirectory()) throw new ConfigError(`'frames.roots' names ${root}, which is not a directory: frames by {path} under it could not be read`);
    }
    const { initial, reference } = this.config.adapter;
    await checkAdapterDir(initial ?? "", "adapter.initial").catch((cause: Error) => {
      if (initial !== null) throw new ConfigError(cause.message, { cause });
    });
    if (reference !== null) await checkAdapterDir(reference, "adapter.reference").catch((cause: Error) => {
      throw new ConfigError(cause.message, { cause });
    });
  }

  /** The adapters the next round continues must be on this disk. */
  async #checkStateAdapters(record: StateRecord): Promise<void> {
    const what = record.round === 0 ? "adapter.initial" : `the adapter of committed round ${record.adapter.round} (state record)`;
    await checkAdapterDir(record.adapter.path, what).catch((cause: Error) => {
      throw new ConfigError(`${cause.message}: the next round continues it`, { cause });
    });
    await checkAdapterDir(record.reference.path, "the reference adapter (state record)").catch((cause: Error) => {
      throw new ConfigError(cause.message, { cause });
    });
  }

  async #probeAtStart(probe: Probe, record: StateRecord): Promise<void> {
    const result = await probe.run(record.adapter.path, record.reference.path);
    if (!result.ok) {
      throw new ConfigError(`the trainer cannot train the probe job (${probe.dir}; trainer.probeAtStart): ${result.error}`);
    }
    this.log.info("probe job trained: the trainer works");
  }

  /** An inline frame must fit the server's max_payload; say so when frames.maxBytes allows more. */
  #checkPayloadLimits(nats: Nats) {
    const maxPayload = nats.nc.info?.max_payload;
    if (maxPayload === undefined) return;
    const inline = Math.floor(((maxPayload - 64 * 1024) * 3) / 4);
    if (this.config.frames.maxBytes > inline) {
      this.log.warn({ maxPayload, framesMaxBytes: this.config.frames.maxBytes, inlineFrameBytes: inline },
        "frames.maxBytes is larger than an inline frame ({png_base64}) can be on this server: larger frames must come by {path} or {object}");
    }
    if (this.config.limits.maxPayloadBytes > maxPayload) {
      this.log.info({ maxPayload, limitsMaxPayloadBytes: this.config.limits.maxPayloadBytes }, "the server's max_payload is below limits.maxPayloadBytes: it is the limit in effect");
    }
  }

  async #initialState(): Promise<VersionedState> {
    const initial = this.config.adapter.initial;
    if (initial === null) throw new ConfigError("'adapter.initial' must name the initial (SFT) adapter dir: round 1 continues it and it is the default reference, got null");
    const reference = this.config.adapter.reference ?? initial;
    const adapterSha = await optionalSha(initial);
    const record: StateRecord = {
      version: 2, policy: this.config.policy.name, round: 0, outcome: "initial",
      adapter: { round: 0, path: initial, sha256: adapterSha },
      reference: { path: reference, sha256: await optionalSha(reference) },
      last_seq: 0, ack_floor: 0, recent_adapters: [{ round: 0, sha256: adapterSha }], unpublished: [],
      outcomes: { range: null, adapters: [] }, lineage: [{ round: 0, parent: null, path: initial, sha256: adapterSha }], rollback: null,
      at: new Date().toISOString(),
    };
    return { record, revision: 0 };
  }

  #context(nats: Nats, state: VersionedState, applied: LoopContext["applied"], consumedIds: ConsumedIds): LoopContext {
    const policy = this.config.policy.name;
    const log = logger("loop", { policy });
    return {
      config: this.config, policy, log, nats,
      events: new EventPublisher(nats.nc, nats.js, policy, log),
      metrics: new Metrics(),
      held: new HeldMessages(this.config.consumer.ackWaitS, log),
      buffer: new RoundBuffer<Buffered>(),
      applied,
      consumedIds,
      rejectedSeqs: new RecentSeqs(100_000),
      reserved: new Map(),
      stopSignal: this.#stopper.signal,
      state,
      ackFloor: state.record.ack_floor,
      tally: { acceptedRows: 0, rejected: 0, last: null, gpuMemory: null },
      health: { status: "ok", cause: null, since: null },
      guard: verdictOf(state.record, this.config.guard),
      phase: "starting",
      stopping: false,
    };
  }

  async #startObservability(ctx: LoopContext) {
    ctx.metrics.committedRound.set(ctx.state.record.round);
    this.#service = await startService(ctx.nats.nc, ctx.policy, {
      snapshot: () => this.snapshot(), rounds: (n) => this.rounds(n), rollback: (to, reason) => this.rollback(to, reason),
    }, logger("service"));
    const { metricsPort, metricsHost, ui } = this.config.observe;
    if (metricsPort !== null) {
      const mounted = ui.enabled ? await this.#mountUi(ctx) : null;
      this.#ui = mounted;
      const { server, port } = await serveHttp({ metrics: ctx.metrics, readiness: () => this.#readiness(), ui: mounted?.handle ?? null }, metricsHost, metricsPort);
      this.#http = server;
      this.metricsPort = port;
    }
    this.#ticker = new StatsTicker(ctx, () => this.snapshot(), async () => {
      const floor = await this.#intake?.ackFloor();
      if (floor != null) ctx.ackFloor = Math.max(ctx.ackFloor, floor);
    });
  }

  /** First job: the pending round of a killed daemon, or the publish a killed daemon did not finish. */
  #resumeWork(pending: Manifest | null) {
    const ctx = this.#ctx as LoopContext;
    const runner = this.#runner as RoundRunner;
    const record = ctx.state.record;
    // in the order they happened: a rollback the record names (announced unless it was), then a round committed as
    // published, unless a rollback moved the record since (a round whose commit rolled back trained from the target)
    const unfinished = async () => {
      if (record.rollback) await runner.announce(record);
      if (record.outcome === "published" && record.adapter.round === record.round) await this.#republish(record);
    };
    if (pending) {
      for (const e of [...pending.events, ...pending.poisoned]) ctx.reserved.set(e.seq, e.id);
      this.#startJob(pending.round, async () => {
        await unfinished();
        await runner.run(pending);
      });
    } else if ((record.outcome === "published" && record.adapter.round === record.round) || record.rollback) {
      this.#startJob(null, unfinished);
    }
  }

  /**
   * An operator's rollback (the service's `rollback` endpoint, issue 23): done at the next safe point between rounds
   * — now when no round is in hand, else right after it — and answered with its announcement. A request the daemon
   * cannot carry out (unknown round, nothing kept to continue it) is refused and moves nothing.
   */
  rollback(toRound: number, reason: string): Promise<AdapterRolledBack> {
    const ctx = this.#ctx;
    if (!ctx || ctx.stopping) return Promise.reject(new Error("the daemon is not running (starting or stopping): ask again"));
    return new Promise((resolve, reject) => {
      this.#rollbacks.push({ toRound, reason, resolve, reject });
      this.#maybeClose();
    });
  }

  async #republish(record: StateRecord) {
    const stats = await readTrainerOutput(record.adapter.path).catch(async () => (await readManifest(roundDir(this.config.workDir, record.policy, record.round)))?.stats ?? null);
    if (stats === null) throw new Error(`round ${record.round}: committed as published, but neither its adapter nor its manifest has its statistics`);
    await (this.#runner as RoundRunner).publish(record.round, record.adapter.path, stats);
  }

  // -------------------------------------------------------------------------------------------------------------
  // intake and rounds

  async #runIntake(): Promise<void> {
    const intake = this.#intake as Intake;
    for await (const msg of intake.messages()) {
      if (this.#ctx?.stopping) break;
      await this.#capacity();
      if (this.#inflight++ === 0) this.#idle = deferred();
      void this.#admit(msg);
    }
  }

  async #admit(msg: JsMsg) {
    try {
      await (this.#admission as Admission).admit(msg);
    } finally {
      if (--this.#inflight === 0) this.#idle?.resolve();
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
    const rollback = this.#rollbacks.shift();
    if (rollback) return this.#startJob(null, () => this.#runRollback(rollback));
    const trigger = ctx.buffer.trigger(Date.now(), this.config.round);
    if (!trigger) return;
    const entries = ctx.buffer.take(trigger, this.config.round);
    const round = this.#nextRound++;
    for (const e of entries) ctx.reserved.set(e.seq, e.id);
    this.#startJob(round, () => (this.#runner as RoundRunner).runClosed(round, entries, trigger));
  }

  async #runRollback(req: RollbackRequest): Promise<void> {
    try {
      req.resolve(await (this.#runner as RoundRunner).rollBack(req.toRound, req.reason));
    } catch (err) {
      req.reject(err as Error);
      if (!isRollbackRefused(err)) throw err; // a failed commit is the daemon's failure, as a round's is
    }
  }

  #startJob(round: number | null, job: () => Promise<void>) {
    const ctx = this.#ctx as LoopContext;
    this.#trainingRound = round;
    this.#running = job()
      .catch((err: unknown) => {
        // a stop interrupts a round at a safe point: its manifest stays, the next start resumes it
        if (isStopRequested(err) || ctx.stopping) return void this.log.info({ round, err: (err as Error).message }, "round left for the next start");
        this.#onFatal(err as Error);
      })
      .finally(() => {
        ctx.reserved.clear();
        this.#running = null;
        this.#trainingRound = null;
        if (!ctx.stopping) setPhase(ctx, "intake");
        this.#wake?.();
        this.#maybeClose();
      });
  }

  #onFatal(err: Error, what = "round failed with an error the daemon cannot continue after") {
    this.log.fatal({ err }, what);
    this.#fatal = err;
    void this.stop();
  }

  async #watchConnection(nats: Nats) {
    void nats.nc.closed().then((err) => this.#onConnectionClosed(err));
    for await (const status of nats.nc.status()) {
      if (status.type === "disconnect") this.#connected = false;
      if (status.type === "reconnect") this.#connected = true;
      if (status.type === "disconnect" || status.type === "reconnect") this.log.warn({ nats: status.type }, "nats connection");
    }
  }

  /**
   * The client reconnects forever, so a connection that closes while running was given up on (the server refused
   * the credentials again on reconnect, for instance): without it the daemon can do nothing, and a live process
   * that looks healthy would hide that. It stops with the reason; the rollouts it held are redelivered elsewhere.
   * Closes of its own (a failed start, a stop) are not faults.
   */
  #onConnectionClosed(err: Error | void) {
    this.#connected = false;
    if (!this.#ctx || this.#ctx.stopping) return;
    const reason = err ? err.message : "closed by the client library";
    this.#onFatal(new Error(`the NATS connection closed and will not reconnect: ${reason}`, { cause: err }), "NATS connection lost for good");
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
    const outcomes = new Map(this.#ctx ? outcomeSummaries(this.#ctx).map((o) => [o.round, o]) : []);
    for (const round of numbers) {
      const manifest = await readManifest(roundDir(this.config.workDir, this.config.policy.name, round)).catch(() => null);
      if (!manifest) continue;
      out.push({
        round, status: manifest.outcome ? `${manifest.status}:${manifest.outcome}` : manifest.status,
        rows: manifest.rows, rollouts: manifest.events.length, sha256: manifest.train_sha256, stats: manifest.stats ?? null,
        outcomes: outcomes.get(round) ?? null,
      });
    }
    return out;
  }

  /** Ready: connected to NATS, the trainer started, not stopped or failed, and not degraded. */
  #readiness(): Readiness {
    const ctx = this.#ctx;
    const health = ctx?.health ?? null;
    const ready = this.#connected && this.#trainerReady && this.#fatal === null && ctx !== null && ctx.phase !== "stopped" && health?.status === "ok";
    return { ready, detail: { connected: this.#connected, trainer: this.#trainerReady, phase: ctx?.phase ?? "starting", round: ctx?.state.record.round ?? null, health } };
  }

  /** The web dashboard on the metrics endpoint (observe.ui), reading this daemon's own NATS connection. */
  async #mountUi(ctx: LoopContext) {
    const { metricsHost, ui } = this.config.observe;
    const { isLoopbackHost } = await import("../tools/ui/access.js");
    if (ui.token === null && !isLoopbackHost(metricsHost)) {
      throw new ConfigError(`'observe.ui.token' must be set when observe.metricsHost (${metricsHost}) is not loopback: the page would be open to the network`);
    }
    const { mountUi } = await import("../tools/ui/mount.js");
    return mountUi(ctx.nats.nc, {
      policy: ctx.policy, source: redactUrl(this.natsUrl ?? ""), host: metricsHost, basePath: ui.path, token: ui.token,
      roundRows: this.config.round.rows, statsIntervalS: this.config.observe.statsIntervalS,
    });
  }
}

interface RollbackRequest {
  toRound: number;
  reason: string;
  resolve: (event: AdapterRolledBack) => void;
  reject: (err: Error) => void;
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
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

/** The trainer of the config: resident ranks keep the model loaded between rounds; a custom command runs per round. */
function roundTrainer(config: Config["trainer"]): RoundTrainer {
  return config.command === null && config.resident ? new ResidentRoundTrainer(config) : new CliRoundTrainer(config);
}
