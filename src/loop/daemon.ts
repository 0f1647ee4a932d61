// The always-on loop (DESIGN.md data flow 1-10): wires connection, state, recovery, admission, the round runner
// and observability, and owns the lifecycle — start (checks first: nothing is pulled until the trainer has trained
// a probe job), the intake pump with backpressure, the round scheduler, graceful stop (SIGTERM: stop pulling, let
// the round in hand reach a safe point, nak the open round for immediate redelivery, drain).
// The CLI decides the exit code: a fatal error (another daemon moved the state) resolves `closed` with it.
import { createHash } from "node:crypto";
import { existsSync, realpathSync } from "node:fs";
import { resolve } from "node:path";
import type { Logger } from "pino";
import type { AdapterRolledBack, RoundSummary, StatsEvent } from "../contract/index.js";
import { logger, setLogLevel } from "../log.js";
import { Admission } from "./admission.js";
import { RecentSeqs } from "./applied.js";
import { CliRoundTrainer } from "./cli-trainer.js";
import { configHash, redactedConfig, redactUrl, type Config } from "./config/index.js";
import { connectNats, ensureStreams, type Nats } from "./connection.js";
import { openAdapterBucket, openIdsBucket, openStateBucket } from "./buckets.js";
import { ConsumedIds } from "./consumed-ids.js";
import { adapterFolders, fetchManifest, syncManifests } from "./continuation.js";
import { setDegraded, setHealthy, setPhase, type Buffered, type LoopContext } from "./context.js";
import { isDiskFault, isStopRequested } from "./errors.js";
import { EventPublisher } from "./events.js";
import { frameObjectOpener } from "./frame-objects.js";
import { FrameRoots } from "./frame-roots.js";
import { HeldMessages } from "./held.js";
import type { Readiness } from "./http-server.js";
import { Intake } from "./intake.js";
import { IntakePump } from "./intake-pump.js";
import { Lease } from "./lease.js";
import type { Manifest } from "./manifest.js";
import { Metrics } from "./metrics.js";
import { startOwnServer, type OwnServer } from "./nats-server.js";
import { Observability } from "./observability.js";
import { roundDir } from "./paths.js";
import { Probe } from "./probe.js";
import { recover } from "./recovery.js";
import { retrying } from "./retry.js";
import { ResidentRoundTrainer } from "./resident-trainer.js";
import { admittedRoundRollouts } from "./round-rollouts.js";
import { RoundBuffer } from "./rounds.js";
import { RoundRunner } from "./round-runner.js";
import { RoundScheduler } from "./round-scheduler.js";
import { roundSummaries } from "./round-summaries.js";
import { checkConfiguredFiles, checkPayloadLimits, checkStateAdapters, initialState, probeAtStart } from "./startup-checks.js";
import { Retention } from "./retention.js";
import { StateStore, type StateRecord, type VersionedState } from "./state.js";
import { statsEvent } from "./stats.js";
import { verdictOf } from "./guard.js";
import type { RoundTrainer } from "./trainer.js";
import { lockWorkDir, type WorkDirLock } from "./work-dir-lock.js";

export interface DaemonOptions {
  config: Config;
  /** default: the resident trainer (trainer.resident, no trainer.command), else CliRoundTrainer */
  trainer?: RoundTrainer;
}

/** The parts that exist once start() has opened everything, together (none without the others). */
interface Running {
  ctx: LoopContext;
  intake: Intake;
  pump: IntakePump;
  runner: RoundRunner;
  scheduler: RoundScheduler;
  observability: Observability;
}

export class Daemon {
  readonly config: Config;
  readonly log: Logger;
  readonly startedAt = Date.now();
  natsUrl: string | null = null;
  #trainer: RoundTrainer;
  #frameRoots: FrameRoots | null = null;
  #running: Running | null = null;
  // what start() opens before the loop runs, closed again in reverse order when a later step fails; the context, the
  // scheduler and observability also here because the service answers (snapshot, readiness) while the last opening
  // steps still run, before `#running` exists
  #lock: WorkDirLock | null = null;
  #ownServer: OwnServer | null = null;
  #nats: Nats | null = null;
  #lease: Lease | null = null;
  #ctx: LoopContext | null = null;
  #scheduler: RoundScheduler | null = null;
  #retention: Retention | null = null;
  #observability: Observability | null = null;
  #trainerReady = false;
  #triggerTimer: NodeJS.Timeout | null = null;
  #connected = false;
  #opening = false;
  #stopRequested = false;
  readonly #stopper = new AbortController();
  readonly #startWaits = new AbortController();
  #fatal: Error | null = null;
  #resolveClosed!: (err: Error | null) => void;
  /** resolves when the daemon stopped; with the fatal error when it stopped because of one */
  readonly closed: Promise<Error | null> = new Promise((r) => (this.#resolveClosed = r));

  constructor(options: DaemonOptions) {
    this.config = options.config;
    // before any child logger exists: pino children take their parent's level when created
    setLogLevel(options.config.log.level);
    this.log = logger("daemon", { policy: options.config.policy.name });
    this.#trainer = options.trainer ?? roundTrainer(options.config);
  }

  /** bound port of /metrics (null when off or not started) */
  get metricsPort(): number | null {
    return this.#observability?.metricsPort ?? null;
  }

  /**
   * Checks, connects, recovers and starts intake. A misconfiguration rejects (and leaves the stream untouched:
   * nothing is pulled before every check passed); everything opened so far is closed again, the own server too.
   * A stop() that arrives meanwhile is held until the opening steps are done, then drains instead of starting intake.
   */
  async start(): Promise<void> {
    this.#opening = true;
    let opened: { running: Running; pending: Manifest | null };
    try {
      opened = await this.#openOnceTheDiskTakesIt();
    } catch (err) {
      await this.#closeOpened();
      // stopped while it waited for NATS, (a standby) for the lease or for the disk: a clean stop
      if (this.#stopRequested && (isStopRequested(err) || isDiskFault(err))) return this.#resolveClosed(this.#fatal);
      this.#resolveClosed(err as Error); // a stop() waiting on a start that failed returns, and so does `closed`
      throw err;
    } finally {
      this.#opening = false;
    }
    if (this.#stopRequested) {
      this.log.info("stop requested while starting: draining before intake starts");
      return this.stop();
    }
    const { running: { ctx, pump, scheduler, runner }, pending } = opened;
    scheduler.resume(pending, this.#unfinished(runner, ctx.state.record));
    setPhase(ctx, "intake");
    pump.start();
    this.#triggerTimer = setInterval(() => scheduler.maybeStart(), 1000);
    this.log.debug({ config: redactedConfig(this.config), configHash: configHash(this.config) }, "configuration");
    this.log.info({ url: redactUrl(this.natsUrl ?? ""), round: ctx.state.record.round, pending: pending?.round ?? null, metricsPort: this.metricsPort }, "daemon started");
  }

  /**
   * #open, done again for as long as the work directory's disk refuses it (full, over quota, read-only, failing:
   * errors.ts isDiskFault). That is the host's fault, and it must not end a daemon at its start any more than it
   * ends a running one: the rollouts wait in the stream meanwhile. What a failed attempt opened is closed again but
   * the trainer (a resident one keeps its model loaded) and the frames roots; each attempt is logged with the disk's
   * error, then the next comes after a backoff (0.5 s doubling to 15 s); a stop ends the wait.
   */
  #openOnceTheDiskTakesIt(): Promise<{ running: Running; pending: Manifest | null }> {
    const attempt = async () => {
      try {
        return await this.#open();
      } catch (err) {
        if (isDiskFault(err)) await this.#closeOpened({ keepTrainer: true });
        throw err;
      }
    };
    return retrying(attempt, {
      what: "start (the work directory's disk refuses a write)", log: this.log, stop: this.#startWaits.signal,
      fatal: (err) => !isDiskFault(err),
    });
  }

  /** Everything start() does before intake, checks first. */
  async #open(): Promise<{ running: Running; pending: Manifest | null }> {
    const config = this.config;
    this.#lock = await lockWorkDir(config.workDir);
    // one for the daemon's life, kept across start attempts as the trainer is: it knows which roots hang, and a new
    // one would strand another thread pool slot in a hung root at each attempt
    const frameRoots = (this.#frameRoots ??= new FrameRoots(config.frames.roots, config.frames.rootTimeoutS * 1000, () => this.#frameRootsHealth()));
    await checkConfiguredFiles(config, frameRoots, this.log);
    if (!this.#trainerReady) await this.#trainer.start();
    this.#trainerReady = true;
    const url = await this.#natsUrl();
    const nats = await connectNats(config.nats, url, { log: this.log, signal: this.#startWaits.signal });
    this.#nats = nats;
    this.natsUrl = url;
    this.#connected = true;
    void this.#watchConnection(nats);
    checkPayloadLimits(nats, config, this.log);
    const buckets = { replicas: config.stream.replicas, log: this.log };
    const stateBucket = await openStateBucket(nats.nc, buckets);
    // a standby waits here, checked and with its trainer started, until the active daemon stops renewing the lease
    const lease = await Lease.acquire({
      kv: stateBucket, js: nats.js, policy: config.policy.name, ttlS: config.lease.ttlS, workDir: config.workDir,
      standby: config.lease.standby, signal: this.#startWaits.signal, log: this.log, onLost: (err) => this.#onFatal(err),
    });
    this.#lease = lease;
    await ensureStreams(nats.jsm, config.stream, this.log);
    const states = StateStore.of(stateBucket, config.policy.name);
    const adapters = await openAdapterBucket(nats.nc, buckets);
    const stored = await states.read();
    // the committed history and what the record names, on this disk: fetched when they are not (a daemon taking over
    // from another host); before anything reads the round folders
    if (stored) await syncManifests(adapters, stored.record, config.workDir, config.intake.dedupRounds, this.log);
    const state = stored ? { ...stored, record: await adapterFolders(adapters, stored.record, config.workDir, this.log) } : await initialState(config);
    await checkStateAdapters(state.record);
    const probe = new Probe(this.#trainer, config);
    if (config.trainer.probeAtStart) await probeAtStart(probe, state.record, config.workDir, this.log);
    const consumedIds = ConsumedIds.of(await openIdsBucket(nats.nc, config.intake.duplicateWindowS, buckets), config.policy.name);
    const recovered = await recover(config.workDir, state.record, config.intake.dedupRounds, this.log);
    const ctx = this.#context(nats, state, recovered.applied, consumedIds);
    for (const seq of recovered.poisoned) ctx.rejectedSeqs.add(seq);
    this.#ctx = ctx;
    this.#frameRootsHealth(); // a root found failing by the start's checks
    const intake = new Intake(nats.js, nats.jsm, {
      policy: ctx.policy, consumer: config.consumer, round: config.round, startSeq: () => ctx.ackFloor + 1,
    }, logger("intake", { policy: ctx.policy }));
    const retention = new Retention({ workDir: config.workDir, policy: ctx.policy, rounds: config.retention.rounds, adapters, log: this.log, stop: ctx.stopSignal });
    this.#retention = retention;
    const runner = new RoundRunner({
      ctx, trainer: this.#trainer, probe, states, adapters, lease, retention,
      ackFloor: () => intake.ackFloor(),
      rollouts: (round, events) => admittedRoundRollouts(nats.jsm, roundDir(config.workDir, ctx.policy, round), round, events),
    });
    const scheduler = new RoundScheduler({
      ctx, runner, nextRound: state.record.round + 1 + (recovered.pending ? 1 : 0), log: this.log,
      onFatal: (err) => this.#onFatal(err), onJobEnd: () => this.#running?.pump.wake(),
    });
    this.#scheduler = scheduler;
    const admission = new Admission(
      ctx, frameRoots, frameObjectOpener(nats.nc, config.frames.objectBucket), () => scheduler.openRound, () => intake.consumerState(),
      (round) => fetchManifest(adapters, ctx.policy, round),
    );
    const pump = new IntakePump({
      intake, admit: (msg) => admission.admit(msg), stopping: () => ctx.stopping, afterAdmit: () => scheduler.maybeStart(),
      full: () => scheduler.busy && ctx.buffer.trigger(Date.now(), config.round) !== null,
    });
    const observability = await Observability.start(ctx, {
      snapshot: () => this.snapshot(), rounds: (n) => this.rounds(n), rollback: (to, reason) => this.rollback(to, reason),
      readiness: () => this.#readiness(), consumer: () => intake.consumerState(),
    }, url);
    this.#observability = observability;
    await intake.ensureConsumer();
    this.#running = { ctx, intake, pump, runner, scheduler, observability };
    return { running: this.#running, pending: recovered.pending };
  }

  /** Graceful stop; idempotent. During start(), it takes effect as soon as the opening steps are done. */
  async stop(): Promise<void> {
    if (this.#opening) {
      this.#stopRequested = true;
      this.#startWaits.abort(); // ends a wait for NATS or (a standby's) for the lease; any other opening step is waited for
      return void (await this.closed);
    }
    const running = this.#running;
    if (!running || running.ctx.stopping) return void (await this.closed);
    const { ctx, intake, pump, scheduler, observability } = running;
    ctx.stopping = true;
    this.#stopper.abort();
    setPhase(ctx, "draining");
    this.log.info("draining");
    if (this.#triggerTimer) clearInterval(this.#triggerTimer);
    await intake.stop();
    await pump.drained();
    await scheduler.settled();
    await this.#retention?.settled();
    scheduler.refuseWaiting("the daemon stopped before the rollback's turn: ask the next daemon");
    await ctx.events.close(); // while the lease is held: a successor's events must not interleave with these
    // the open round was never committed: hand its messages back for immediate redelivery
    ctx.held.nak([...ctx.buffer.entries()].map((e) => e.seq));
    ctx.held.release();
    await observability.stop();
    await this.#trainer.close();
    await this.#lease?.release();
    await ctx.nats.nc.drain().catch(() => {});
    await this.#ownServer?.stop();
    await this.#lock?.release();
    setPhase(ctx, "stopped");
    this.log.info("stopped");
    this.#frameRoots?.close();
    const stuck = this.#frameRoots?.overdueCalls ?? 0;
    if (stuck > 0) this.log.warn({ calls: stuck }, "file-system calls into a hung frames root have not returned: the process exits once they do (or at SIGKILL); nothing is lost, it drained first");
    this.#resolveClosed(this.#fatal);
  }

  /**
   * An operator's rollback (the service's `rollback` endpoint, issue 23): done at the next safe point between rounds
   * — now when no round is in hand, else right after it — and answered with its announcement. A request the daemon
   * cannot carry out (unknown round, nothing kept to continue it) is refused and moves nothing.
   */
  rollback(toRound: number, reason: string): Promise<AdapterRolledBack> {
    const running = this.#running;
    if (!running || running.ctx.stopping) return Promise.reject(new Error("the daemon is not running (starting or stopping): ask again"));
    return running.scheduler.rollback(toRound, reason);
  }

  /** A frames root failing as a host does holds its rollouts back (they wait, nak'd): the daemon says `degraded`. */
  #frameRootsHealth(): void {
    const ctx = this.#ctx;
    if (!ctx) return;
    const failing = this.#frameRoots?.failing() ?? [];
    if (failing.length === 0) return setHealthy(ctx, "frames");
    this.log.warn({ failing }, "degraded: a frames root fails; its rollouts wait, none is rejected for it");
    setDegraded(ctx, failing.map((f) => f.cause).join("; "), "frames");
  }

  // -------------------------------------------------------------------------------------------------------------
  // startup

  async #natsUrl(): Promise<string> {
    if (this.config.nats.url !== null) return this.config.nats.url;
    this.#ownServer = await startOwnServer(this.config, logger("nats-server"));
    return this.#ownServer.url;
  }

  /**
   * What start() opened before it failed, closed in reverse order and forgotten (an attempt after a disk fault opens
   * it anew); a failure here must not hide the first one. The trainer and the frames roots too, unless another
   * attempt follows.
   */
  async #closeOpened({ keepTrainer = false } = {}): Promise<void> {
    const nats = this.#nats;
    this.#nats = null; // its connection closing now is ours, not a fault to report (#onConnectionClosed)
    this.#connected = false;
    await this.#observability?.stop();
    this.#ctx?.held.release();
    if (!keepTrainer) {
      this.#frameRoots?.close();
      await this.#trainer.close().catch(() => {});
      this.#trainerReady = false;
    }
    await this.#ctx?.events.close();
    await this.#lease?.release().catch(() => {});
    await nats?.nc.close().catch(() => {});
    await this.#ownServer?.stop().catch(() => {});
    await this.#lock?.release().catch(() => {});
    this.#observability = null;
    this.#ctx = null;
    this.#scheduler = null;
    this.#lease = null;
    this.#ownServer = null;
    this.#lock = null;
    this.natsUrl = null;
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
      degradedBy: new Map(),
      guard: verdictOf(state.record, this.config.guard),
      phase: "starting",
      stopping: false,
    };
  }

  /**
   * What may be unannounced, in the order it happened: a rollback the record names (announced unless it was), then
   * the adapter the record serves (announced unless the subject holds it or a later one). Null when nothing can be.
   */
  #unfinished(runner: RoundRunner, record: StateRecord): (() => Promise<void>) | null {
    // the adapter served: announced again unless the subject already holds it or a later one (a kill before the
    // announcement, or RLLOOP_EVENTS' age limit having taken the last one away while no round published)
    const republish = record.adapter.round > 0;
    if (!republish && !record.rollback) return null;
    return async () => {
      if (record.rollback) await runner.announce(record);
      if (republish) await runner.republish(record);
    };
  }


  // -------------------------------------------------------------------------------------------------------------
  // faults

  #onFatal(err: Error, what = "round failed with an error the daemon cannot continue after") {
    this.log.fatal({ err }, what);
    this.#fatal = err;
    void this.stop();
  }

  async #watchConnection(nats: Nats) {
    void nats.nc.closed().then((err) => this.#onConnectionClosed(nats, err));
    for await (const status of nats.nc.status()) {
      if (nats !== this.#nats) break; // closed by #closeOpened after a failed start attempt
      if (status.type === "disconnect") this.#connected = false;
      if (status.type === "reconnect") {
        this.#connected = true;
        this.#ctx?.events.reconnected();
      }
      if (status.type === "disconnect" || status.type === "reconnect") this.log.warn({ nats: status.type }, "nats connection");
    }
  }

  /**
   * The client reconnects forever, so a connection that closes while running was given up on (the server refused
   * the credentials again on reconnect, for instance): without it the daemon can do nothing, and a live process
   * that looks healthy would hide that. It stops with the reason; the rollouts it held are redelivered elsewhere.
   * Closes of its own (a failed start, a stop) are not faults.
   */
  #onConnectionClosed(nats: Nats, err: Error | void) {
    if (nats !== this.#nats) return; // a connection of a start attempt that failed, closed by #closeOpened
    this.#connected = false;
    if (!this.#ctx || this.#ctx.stopping) return;
    const reason = err ? err.message : "closed by the client library";
    this.#onFatal(new Error(`the NATS connection closed and will not reconnect: ${reason}`, { cause: err }), "NATS connection lost for good");
  }

  // -------------------------------------------------------------------------------------------------------------
  // observability

  snapshot(): StatsEvent {
    // the service and the stats ticker start once both exist (in start(), before the loop runs)
    const ctx = this.#ctx, scheduler = this.#scheduler;
    if (ctx === null || scheduler === null) throw new Error("the daemon has not opened its state yet");
    return statsEvent(ctx, {
      openRound: scheduler.openRound,
      trainingRound: scheduler.trainingRound,
      uptimeS: (Date.now() - this.startedAt) / 1000,
      rowsPerS: this.#observability?.rate ?? 0,
    });
  }

  rounds(limit: number): Promise<RoundSummary[]> {
    return roundSummaries(this.config, this.#ctx, limit);
  }

  /** Ready: connected to NATS, the trainer started, not stopped or failed, and not degraded. */
  #readiness(): Readiness {
    const ctx = this.#ctx;
    const health = ctx?.health ?? null;
    const ready = this.#connected && this.#trainerReady && this.#fatal === null && ctx !== null && ctx.phase !== "stopped" && health?.status === "ok";
    return { ready, detail: { connected: this.#connected, trainer: this.#trainerReady, phase: ctx?.phase ?? "starting", round: ctx?.state.record.round ?? null, health } };
  }
}

/** The trainer of the config: resident ranks keep the model loaded between rounds; a custom command runs per round. */
function roundTrainer(config: Config): RoundTrainer {
  const { trainer } = config;
  if (trainer.command === null && trainer.resident) return new ResidentRoundTrainer(trainer);
  // the path as the file system names it: a restart through a symlinked path holds the same lock and must find the
  // same marks (a work dir not made yet has no leftovers)
  const path = existsSync(config.workDir) ? realpathSync(config.workDir) : resolve(config.workDir);
  const workDir = createHash("sha256").update(path).digest("hex").slice(0, 16);
  return new CliRoundTrainer(trainer, { mark: `daemon-${workDir}`, endLeftovers: true });
}
