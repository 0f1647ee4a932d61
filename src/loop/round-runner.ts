// One round from closed buffer (or pending manifest) to published adapter (DESIGN.md data flow steps 4-8):
// assemble → train until it trains → gate → commit (KV compare-and-set) → ack → publish. The order is the
// guarantee: nothing is acked before the commit, nothing is published before it, and every step after the commit is
// idempotent, so a restart at any point redoes the uncommitted part only.
// Training never gives up on a round (docs/daemon.md "Faults"): a failed attempt is judged by the probe — when the
// probe fails too, the trainer or its host is at fault: the daemon is degraded and retries with backoff, rejecting
// nothing; when the probe trains, the round's rows are suspect: after a second failure the rollouts it fails on are
// isolated (poison-isolation.ts), rejected as `poison`, and the rest of the round trains. Non-finite statistics are
// such a failure (only a round that diverges as a whole, no part of it, is the gate's to reject). A trained round
// that fails a log-prob gate has the rollouts far from the rest's log-prob gaps taken out the same way
// (logp-outliers.ts, `logp_mismatch`) and the rest trained again, before the gate judges the round's means.
import { readdir, readFile, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import type { ObjectStore } from "@nats-io/obj";
import { adapterName, ROLLOUT_STREAM, type FaultKind, type PpoStats, type RoundOutcome, type RoundTrigger } from "../contract/index.js";
import { sha256, sha256File, writeFileAtomic } from "../files.js";
import { PhaseClock } from "../phase-clock.js";
import { assembleRound, TRAIN_FILE, trainJsonl, type RoundRollout } from "./assemble.js";
import { Backoff } from "./backoff.js";
import { committedStats } from "./committed-stats.js";
import { configHash } from "./config/index.js";
import { degradedCause, setDegraded, setHealthy, setPhase, type Buffered, type LoopContext } from "./context.js";
import { dropOptimizer, storeContinuation, storeManifest } from "./continuation.js";
import { isDiskFault, isLeaseError, isStateConflict, isTransient, StopRequestedError } from "./errors.js";
import { findFinishedAttempt } from "./finished-attempt.js";
import { checkGate, failsLogpGate, nonFiniteStat } from "./gate.js";
import { logpOutliers } from "./logp-outliers.js";
import { readManifest, updated, writeManifest, type Manifest } from "./manifest.js";
import { frameFileName, incomingDir, roundDir } from "./paths.js";
import { errorSummary, isolatePoison, TrainerFaultError, type Culprit } from "./poison-isolation.js";
import { diskRoom, trainingOutputBytes } from "./disk-room.js";
import type { Probe, ProbeResult } from "./probe.js";
import { lastAnnouncement, lastPublishedRoundEvent, publishAdapter } from "./publish.js";
import { retrying, type RetryOptions } from "./retry.js";
import { attemptOutDir, removeJobOutput, roundJob } from "./round-job.js";
import { withRecentAdapter, withUnpublished, type StateRecord, type StateStore } from "./state.js";
import { betAlphas, judgeLineage, verdictOf } from "./guard.js";
import { foldOutcomes } from "./live-outcomes.js";
import { announceRollback, isRollbackRefused, keptLineage, parentOf, rolledBack, targetFolder, type RollbackInfo } from "./rollback.js";
import type { AdapterRolledBack, LineageEntry } from "../contract/index.js";
import { pausePoint } from "./test-hooks.js";
import type { RoundTrainer } from "./trainer.js";

export interface RunnerDeps {
  ctx: LoopContext;
  trainer: RoundTrainer;
  probe: Probe;
  states: StateStore;
  adapters: ObjectStore;
  /** current consumer ack floor, recorded in the state (null when unknown) */
  ackFloor: () => Promise<number | null>;
  /** the policy's lease (lease.ts), checked before each commit; absent in tests that run a runner alone */
  lease?: { assertHeld(): Promise<void> };
  /** the rollouts of events not held in memory, read back from the stream (a round resumed after a restart) */
  rollouts: (round: number, events: Manifest["events"]) => Promise<RoundRollout[]>;
  /** prunes old rounds after each commit (retention.ts); absent in tests that run a runner alone */
  retention?: { afterCommit(record: StateRecord): void };
}

interface Trained {
  manifest: Manifest;
  /** null when no rollout is left (every one was taken out) */
  stats: PpoStats | null;
  outDir: string | null;
}

interface Verdict {
  outcome: RoundOutcome;
  /** the live-outcome guard's rollback decided in this round's commit (issue 23), with its target on this disk */
  rollback?: { info: RollbackInfo; target: LineageEntry };
  reason: string | null;
  stats: PpoStats | null;
  /** the trained adapter's folder, when one exists */
  outDir: string | null;
}

/** The longest wait between two tries of a round the work directory's disk failed (#throughDiskFaults). */
const DISK_RETRY_MAX_S = 30;

export class RoundRunner {
  /** rollouts of the round in hand, by stream sequence (what the buffer gave; a resumed round reads the stream) */
  #known = new Map<number, RoundRollout>();
  /** ms timestamp of the round in hand's last rollout in, for the round-latency histogram (unknown when resumed) */
  #lastArrival: number | null = null;
  /** the trainer's log-prob gaps could not be read once (said once per process) */
  #gapsUnchecked = false;

  constructor(private readonly deps: RunnerDeps) {}

  private get ctx() { return this.deps.ctx; }

  /** A closed buffer: assemble its folder, then run it. */
  async runClosed(round: number, entries: Buffered[], trigger: RoundTrigger): Promise<void> {
    const { ctx } = this;
    setPhase(ctx, "assembling");
    const rows = entries.reduce((n, e) => n + e.rows, 0);
    await ctx.events.round({ type: "round.closed", round, trigger, rows, rollouts: entries.length });
    this.#known = new Map(entries.map((e) => [e.seq, { seq: e.seq, rollout: e.rollout }]));
    this.#lastArrival = Math.max(...entries.map((e) => e.arrivedAt));
    await this.#throughDiskFaults(round, () => this.#assemble(round, entries.length, rows, trigger));
  }

  /** Train, gate, commit, ack, publish a round that has a manifest (a killed daemon's pending round). */
  async run(manifest: Manifest): Promise<void> {
    await this.#throughDiskFaults(manifest.round, async () => manifest);
  }

  /** The round's folder from the rollouts in hand (#known). */
  async #assemble(round: number, rollouts: number, rows: number, trigger: RoundTrigger): Promise<Manifest> {
    const { ctx } = this;
    setPhase(ctx, "assembling");
    const state = ctx.state.record;
    const dir = roundDir(ctx.config.workDir, ctx.policy, round);
    const started = performance.now();
    const manifest = await assembleRound({
      round, policy: ctx.policy, dir, incoming: incomingDir(ctx.config.workDir, ctx.policy), items: [...this.#known.values()], trigger,
      advantage: ctx.config.advantage,
      parent: { round: state.adapter.round, path: state.adapter.path, sha256: state.adapter.sha256 },
      reference: { path: state.reference.path, sha256: state.reference.sha256 },
      configHash: configHash(ctx.config), seed: ctx.config.trainer.seed + round,
      beforeManifest: () => pausePoint("assembling", round, ctx.log),
    });
    ctx.metrics.stepSeconds.observe({ step: "assemble" }, (performance.now() - started) / 1000);
    ctx.log.info({ round, rows, rollouts, trigger, sha256: manifest.train_sha256 }, "round assembled");
    await ctx.events.round({ type: "round.assembled", round, rows, sha256: manifest.train_sha256, dir });
    return manifest;
  }

  /**
   * Runs the round (#run) from the manifest `first` gives, through faults of the work directory's disk (full, over
   * quota, read-only, failing: errors.ts isDiskFault) before its commit: the round waits, degraded, and is taken up
   * again from what its folder holds — its manifest, or `first`'s when it has none — as a restart would take it, so
   * the daemon stays up and no rollout is rejected for the host's fault. After the commit each step retries on its
   * own (retry.ts).
   */
  async #throughDiskFaults(round: number, first: () => Promise<Manifest>): Promise<void> {
    const { ctx } = this;
    // a try that finds the disk still failing costs a write, not a training: it comes at least every 30 s
    const { retryMinS, retryMaxS } = ctx.config.trainer;
    const backoff = new Backoff(Math.min(retryMinS, DISK_RETRY_MAX_S) * 1000, Math.min(retryMaxS, DISK_RETRY_MAX_S) * 1000);
    const dir = roundDir(ctx.config.workDir, ctx.policy, round);
    let cause: string | null = null;
    for (;;) {
      try {
        await this.#run((cause !== null ? await readManifest(dir) : null) ?? await first());
        break;
      } catch (err) {
        if (!isDiskFault(err) || ctx.state.record.round >= round) throw err;
        this.#throwIfStopping();
        cause = `the work directory's disk fails round ${round}: ${(err as Error).message}`;
        ctx.log.error({ round, err }, "the work directory's disk failed the round; it waits, then goes on from its folder");
        await this.#degradedWait(cause, backoff);
      }
    }
    if (cause !== null && degradedCause(ctx, "round") === cause) setHealthy(ctx);
  }

  async #run(resumed: Manifest): Promise<void> {
    const { ctx } = this;
    const dir = roundDir(ctx.config.workDir, ctx.policy, resumed.round);
    const manifest = await this.#withoutStaleRollback(resumed, dir);
    let trained = await this.#trainUntilDone(manifest, dir);
    await pausePoint("training", manifest.round, ctx.log);
    // the round's rollouts count for the adapters that served them in the record this commit writes (exactly once)
    let outcomes = this.#outcomesWith(await this.#rolloutsOf(manifest.round, trained.manifest.events));
    // a rollback decided for this round before a restart (or a fault of the disk) stands as decided: judged again on
    // fewer rollouts (some taken out against the target) it might not be found, and the round, trained from the target,
    // would commit without it
    const decided = trained.manifest.rollback;
    let verdict = decided
      ? { ...this.#judge(trained), rollback: { info: { trigger: decided.trigger, regressed: decided.regressed, reason: decided.reason, evidence: decided.evidence }, target: decided.target } }
      : await this.#guarded(this.#judge(trained), outcomes, manifest.round);
    if (verdict.rollback && trained.stats !== null && trained.manifest.parent.path !== verdict.rollback.target.path) {
      // the round's rollouts are good data; its training continued the regressed lineage: trained again from the
      // rollback's target, they continue the lineage served from now on instead of being lost with that adapter
      trained = await this.#retrainFrom(trained.manifest, dir, verdict.rollback);
      verdict = { ...this.#judge(trained), rollback: verdict.rollback };
      // the rollouts this training took out (far from the target's log-probs, or poison to it) count for nothing
      outcomes = this.#outcomesWith(await this.#rolloutsOf(manifest.round, trained.manifest.events));
    }
    const clock = new PhaseClock(); // where the commit's time goes, in "round committed"
    const adapter = await this.#placeAdapter(verdict, dir);
    await this.#recordRejections(trained.manifest);
    clock.lap("adapter");
    setPhase(ctx, "committing");
    // still the active daemon first: one that froze past the TTL must not leave its round's ids beside its successor's
    // rounds (they would say these rollouts committed in a round of that number; admission.ts checks that round too)
    await retrying(async () => {
      await this.#assertStillActive();
      await ctx.consumedIds.record(manifest.round, trained.manifest.events);
    }, { what: `ids of round ${manifest.round}`, log: ctx.log, health: this.#health(), stop: ctx.stopSignal, fatal: isSuperseded });
    clock.lap("ids");
    const prev = ctx.state.record;
    const committed = committedManifest(trained.manifest, verdict);
    // what the next round continues from goes to the object store before the commit (continuation.ts); only while
    // still the active daemon: one that froze past the TTL must not overwrite the objects its successor committed
    const next = await retrying(async () => {
      await this.#assertStillActive();
      const record = await storeContinuation(this.deps.adapters, ctx.nats.jsm, await this.#nextState(trained.manifest, verdict, adapter, outcomes), prev);
      await storeManifest(this.deps.adapters, committed);
      return record;
    }, { what: `objects of round ${manifest.round}`, log: ctx.log, health: this.#health(), stop: ctx.stopSignal, fatal: isSuperseded });
    clock.lap("objects");
    // without the lease, nothing is committed (lease.ts); the compare-and-set refuses a second writer anyway
    const revision = await retrying(async () => {
      await this.deps.lease?.assertHeld();
      return this.deps.states.commit(next, ctx.state.revision);
    }, { what: `commit of round ${manifest.round}`, log: ctx.log, health: this.#health(), stop: ctx.stopSignal, fatal: (err) => isStateConflict(err) || isLeaseError(err) });
    ctx.state = { record: next, revision };
    clock.lap("state");
    ctx.metrics.stepSeconds.observe({ step: "commit" }, clock.totalSeconds());
    ctx.guard = verdictOf(next, ctx.config.guard);
    await pausePoint("committed", manifest.round, ctx.log);
    await this.#afterCommit(committed, verdict, revision, dir, clock);
    await dropOptimizer(this.deps.adapters, prev, next, ctx.log);
    this.deps.retention?.afterCommit(next);
    this.#known.clear();
    // in the order they happened: the rollback, then the round's own adapter (trained from its target)
    if (verdict.rollback) await this.announce(next);
    if (verdict.outcome === "published" && adapter) await this.publish(manifest.round, adapter.path, verdict.stats as PpoStats);
    this.#lastArrival = null;
  }

  // -------------------------------------------------------------------------------------------------------------
  // the live-outcome guard (issue 23)

  /** The state's live outcomes with these committed rollouts folded in. */
  #outcomesWith(items: RoundRollout[]): StateRecord["outcomes"] {
    const { config, state } = this.ctx;
    const bets = betAlphas(config.guard);
    return foldOutcomes(state.record.outcomes, items.map((i) => ({ adapter: i.rollout.adapter.round, reward: i.rollout.reward, group: i.rollout.group })), {
      range: config.guard.rewardRange, successThreshold: config.guard.successThreshold, pairByGroup: config.guard.pairByGroup,
      maxGroups: config.guard.maxGroups, baselines: config.guard.baselines, betAlpha: bets.single, pairBetAlpha: bets.pair,
      parentOf: parentOf(state.record),
    });
  }

  /** The guard's verdict on the serving lineage once this round's rollouts count; a regression found while the guard
   *  is enabled rolls back in this commit (run() then trains the round again from the target). */
  async #guarded(verdict: Verdict, outcomes: StateRecord["outcomes"], round: number): Promise<Verdict> {
    const { ctx } = this;
    const record = ctx.state.record;
    const judged = judgeLineage({ outcomes, serving: record.adapter.round, parentOf: parentOf(record), config: ctx.config.guard });
    ctx.guard = judged;
    if (judged.status !== "regressed" || !ctx.config.guard.enabled) return verdict;
    const target = await retrying(() => targetFolder(this.deps.adapters, record, judged.target, ctx.config.workDir, ctx.log).catch((err: unknown) => {
      if (isRollbackRefused(err)) return null;
      throw err;
    }), { what: `rollback target of round ${round}`, log: ctx.log, health: this.#health(), stop: ctx.stopSignal });
    if (target === null) {
      ctx.log.error({ round, verdict: judged }, "the guard found a regression but the better adapter is not kept: no rollback");
      return verdict;
    }
    const e = judged.evidence;
    const reason = `live-outcome guard: r${judged.candidate} (mean ${e.candidate.mean.toFixed(4)} over ${e.candidate.count} rollouts) is worse than r${judged.target} (mean ${e.baseline.mean.toFixed(4)} over ${e.baseline.count}) by more than guard.minEffect ${e.min_effect} (${e.test} test, upper bound of the difference ${e.difference_upper.toFixed(4)}, guard.alpha ${e.alpha})`;
    ctx.log.warn({ round, candidate: judged.candidate, target: judged.target, evidence: e }, "regression on the robots: rolling back");
    const rollback = { info: { trigger: "guard" as const, regressed: judged.candidate, reason, evidence: e }, target };
    return { ...verdict, rollback };
  }

  /** The round's rows trained again, continuing the rollback's target (decided in this round's commit). The manifest
   *  names the new parent and the rollback, and goes back to `assembled` first, so a restart trains from the target,
   *  never commits the training that continued the regressed lineage, and commits the rollback as decided. */
  async #retrainFrom(manifest: Manifest, dir: string, rollback: NonNullable<Verdict["rollback"]>): Promise<Trained> {
    const { ctx } = this;
    const { target, info } = rollback;
    ctx.log.warn({ round: manifest.round, from: manifest.parent.round, to: target.round }, "the round trains again from the rollback's target");
    const again = updated(manifest, {
      parent: { round: target.round, path: target.path, sha256: target.sha256 }, status: "assembled",
      rollback: {
        from: { round: ctx.state.record.adapter.round, sha256: ctx.state.record.adapter.sha256 },
        target, trigger: info.trigger, regressed: info.regressed, reason: info.reason, evidence: info.evidence,
      },
    });
    await writeManifest(dir, again);
    return this.#trainUntilDone(again, dir);
  }

  /** The manifest without a rollback decided for it that no longer applies: the served adapter moved since (another
   *  daemon's rollback, taken over with the lease) or the guard was turned off. The round trains again from the
   *  adapter served now, and is judged as any round. */
  async #withoutStaleRollback(manifest: Manifest, dir: string): Promise<Manifest> {
    const decided = manifest.rollback;
    const served = this.ctx.state.record.adapter;
    if (!decided) return manifest;
    const from = decided.from;
    if (this.ctx.config.guard.enabled && from !== undefined && from.round === served.round && from.sha256 === served.sha256) return manifest;
    // the rollouts taken out while it trained from the target stay out (their frames are gone): said here, by name
    this.ctx.log.warn({
      round: manifest.round, decided: { from: from?.round ?? null, to: decided.target.round }, served: served.round, guard: this.ctx.config.guard.enabled,
      takenOut: manifest.poisoned.map((p) => ({ id: p.id, reason: p.reason })),
    }, "the rollback decided for this round no longer applies: it trains again from the adapter served now");
    const { rollback: _dropped, ...rest } = manifest;
    const again = updated(rest, { parent: { round: served.round, path: served.path, sha256: served.sha256 }, status: "assembled" });
    await writeManifest(dir, again);
    return again;
  }

  /** An operator's rollback (daemon.ts runs it between rounds): one compare-and-set, then the announcement. */
  async rollBack(to: number, reason: string): Promise<AdapterRolledBack> {
    const { ctx } = this;
    setPhase(ctx, "committing");
    const prev = ctx.state.record;
    // NATS or the disk failing meanwhile is retried; only what cannot be done as asked ends the request
    const target = await retrying(() => targetFolder(this.deps.adapters, prev, to, ctx.config.workDir, ctx.log),
      { what: `rollback target round ${to}`, log: ctx.log, health: this.#health(), stop: ctx.stopSignal, fatal: isRollbackRefused });
    const next = await retrying(async () => {
      await this.#assertStillActive();
      return storeContinuation(this.deps.adapters, ctx.nats.jsm, rolledBack(prev, target, { trigger: "manual", regressed: null, reason, evidence: null }, await this.#streamSeq()), prev);
    }, { what: `objects of the rollback to round ${to}`, log: ctx.log, health: this.#health(), stop: ctx.stopSignal, fatal: (err) => isRollbackRefused(err) || isSuperseded(err) });
    const revision = await retrying(async () => {
      await this.deps.lease?.assertHeld();
      return this.deps.states.commit(next, ctx.state.revision);
    }, { what: `commit of the rollback to round ${to}`, log: ctx.log, health: this.#health(), stop: ctx.stopSignal, fatal: (err) => isStateConflict(err) || isLeaseError(err) });
    ctx.state = { record: next, revision };
    ctx.guard = verdictOf(next, ctx.config.guard);
    ctx.log.warn({ from: prev.adapter.round, to, reason }, "rolled back by hand");
    await dropOptimizer(this.deps.adapters, prev, next, ctx.log);
    this.deps.retention?.afterCommit(next);
    return this.announce(next);
  }

  /** Idempotent: announces the record's rollback unless the subject already holds it. */
  async announce(record: StateRecord): Promise<AdapterRolledBack> {
    const { ctx } = this;
    setPhase(ctx, "publishing");
    const result = await retrying(() => announceRollback(ctx.nats, record), { what: `rollback announcement ${record.rollback?.seq}`, log: ctx.log, health: this.#health(), stop: ctx.stopSignal });
    if (result.announced) {
      ctx.metrics.rollbacks.inc({ trigger: result.event.trigger });
      ctx.log.info({ to: result.event.round, from: result.event.from.round, seq: result.event.seq }, "rollback announced");
    }
    return result.event;
  }

  // -------------------------------------------------------------------------------------------------------------
  // training

  async #trainUntilDone(initial: Manifest, dir: string): Promise<Trained> {
    const { ctx } = this;
    let manifest = await this.#rowsAsManifest(initial, dir);
    const finished = await this.#finishedAttempt(manifest, dir);
    await removeAttemptsExcept(dir, finished?.outDir ?? null); // a stopped or killed run's unfinished or unused ones
    if (finished) {
      const without = await this.#withoutOutliers(finished.manifest, finished.stats as PpoStats, dir, finished.outDir as string);
      if (without === null) return finished;
      manifest = without;
    }
    const backoff = new Backoff(ctx.config.trainer.retryMinS * 1000, ctx.config.trainer.retryMaxS * 1000);
    let suspect = 0; // consecutive failures with the probe training: the rows are suspect
    let unreproduced = 0; // isolations that found no culprit
    // the last attempt with the rows' non-finite statistics (its output kept for the gate), and how many in a row had them
    let diverged: { stats: PpoStats; outDir: string; times: number } | null = null;
    const forgetDiverged = async () => {
      if (diverged !== null) await rm(diverged.outDir, { recursive: true, force: true });
      diverged = null;
    };
    for (;;) {
      if (manifest.events.length === 0) return { manifest, stats: null, outDir: null };
      this.#throwIfStopping();
      const attempt = manifest.attempts + 1;
      manifest = updated(manifest, { status: "training", attempts: attempt });
      await writeManifest(dir, manifest);
      setPhase(ctx, "training");
      await ctx.events.round({ type: "round.training", round: manifest.round, attempt });
      const outDir = attemptOutDir(dir, attempt);
      const result = await this.#attempt(manifest, dir, outDir);
      await pausePoint("attempt", manifest.round, ctx.log);
      const garbage = "stats" in result ? nonFiniteStat(result.stats) : null;
      if ("stats" in result && garbage === null) {
        await forgetDiverged();
        const without = await this.#withoutOutliers(manifest, result.stats, dir, outDir);
        if (without === null) return this.#trained(manifest, result.stats, outDir);
        // trained again without them: their rows alone failed the round's gate. The trainer trained: what failed
        // before this attempt counts no more
        manifest = without;
        suspect = unreproduced = 0;
        backoff.reset();
        setHealthy(ctx);
        continue;
      }
      this.#throwIfStopping();
      const times: number = (diverged?.times ?? 0) + 1;
      await forgetDiverged();
      // an attempt that failed with an error leaves nothing to keep: its space back before the disk is asked for room
      // (a full disk), and never taken for a result by a later run
      if (!("stats" in result)) await removeJobOutput(outDir);
      const { fault, probeError } = await this.#blame(manifest, !("stats" in result));
      // non-finite statistics: the trainer's or its host's when the probe's are too (garbage, not kept: a restart would
      // take a finished attempt's output as the round's); else the rows', judged as a failure is — tried again, then
      // the rollouts it diverges on isolated — and the round's own when it diverges every time while no few rollouts
      // do: the gate rejects it then, from the last such attempt's output (kept for it)
      if ("stats" in result && fault === "data") diverged = { stats: result.stats, outDir, times };
      else if ("stats" in result) await removeJobOutput(outDir);
      this.#throwIfStopping();
      const error = "stats" in result ? `its statistics are not finite (${garbage})` : result.error;
      ctx.log.error({ round: manifest.round, attempt, fault, err: errorSummary(error) }, "training attempt failed");
      await ctx.events.round({ type: "round.attempt_failed", round: manifest.round, attempt, fault, error: errorSummary(error) });
      if (fault === "trainer") {
        suspect = 0;
        await this.#degradedWait(`round ${manifest.round} cannot train (${errorSummary(error)}) and neither can the probe: ${errorSummary(probeError ?? "")}`, backoff);
        continue;
      }
      if (++suspect < 2) continue; // once more as a whole: a one-off failure (a rank killed from outside) blames no one
      suspect = 0;
      const culprits = await this.#isolate(manifest, dir, error, backoff);
      if (culprits === null) continue;
      // a divergence that every attempt repeats, found in no part or in half the round or more, is the round's own (a
      // configuration the probe's small job does not show, such as a learning rate too high for these rows): it is not
      // blamed on rollouts, the gate rejects the round as it always did
      const roundsOwn = culprits.length === 0 || culprits.length * 2 >= manifest.events.length;
      if (diverged !== null && roundsOwn) {
        if (diverged.times >= 2) return this.#trained(manifest, diverged.stats, diverged.outDir);
        continue; // it diverged once (a one-off of the host's?): the whole round again before anything is decided
      }
      if (culprits.length === 0) {
        if (++unreproduced >= 2) await this.#degradedWait(`round ${manifest.round} fails as a whole but every part of it trains: ${errorSummary(error)}`, backoff);
        continue;
      }
      await forgetDiverged();
      manifest = await this.#withoutPoison(manifest, dir, culprits);
    }
  }

  async #trained(manifest: Manifest, stats: PpoStats, outDir: string): Promise<Trained> {
    setHealthy(this.ctx);
    await this.ctx.events.round({ type: "round.trained", round: manifest.round, stats });
    return { manifest, stats, outDir };
  }

  /** A killed daemon's last attempt that had finished (its stats.json written last) is used, not trained again. */
  async #finishedAttempt(manifest: Manifest, dir: string): Promise<Trained | null> {
    if (manifest.status !== "training" || manifest.attempts === 0) return null;
    const finished = await findFinishedAttempt(dir, manifest.attempts);
    if (!finished) return null;
    // non-finite statistics are judged by the probe first (#trainUntilDone): trained again, not gated as they are
    if (nonFiniteStat(finished.stats) !== null) return null;
    this.ctx.log.info({ round: manifest.round, attempt: manifest.attempts, outDir: finished.outDir }, "using the finished training of the previous run's last attempt");
    return { manifest, stats: finished.stats, outDir: finished.outDir };
  }

  /** One training attempt: its statistics, or the trainer's error. */
  async #attempt(manifest: Manifest, dir: string, outDir: string): Promise<{ stats: PpoStats } | { error: string }> {
    const { ctx } = this;
    const started = performance.now();
    try {
      const stats = await this.deps.trainer.train(this.#job(manifest, dir, join(dir, TRAIN_FILE), outDir), {
        label: `round ${manifest.round} attempt ${manifest.attempts}`, logFile: join(dir, `trainer.${manifest.attempts}.log`),
      });
      const seconds = (performance.now() - started) / 1000;
      ctx.metrics.stepSeconds.observe({ step: "train" }, seconds);
      ctx.metrics.trainSeconds.observe(seconds);
      ctx.log.info({ round: manifest.round, attempt: manifest.attempts, stats }, "round trained");
      return { stats };
    } catch (err) {
      return { error: (err as Error).message };
    }
  }

  #job(manifest: Manifest, dir: string, data: string, out: string) {
    return roundJob(this.ctx.config.trainer, { dir, data, adapter: manifest.parent.path ?? "", ref: manifest.reference.path ?? "", out, seed: manifest.seed });
  }

  /** The probe decides: it fails too → the trainer or its host; it trains → the round's rows. */
  async #blame(manifest: Manifest, failedWithError: boolean): Promise<{ fault: FaultKind; probeError: string | null }> {
    const probe = await this.#probe(manifest, failedWithError);
    if (this.ctx.stopping) return { fault: "undecided", probeError: null };
    if (!probe.ok) this.ctx.log.warn({ round: manifest.round, err: errorSummary(probe.error) }, "the probe failed too");
    return probe.ok ? { fault: "data", probeError: null } : { fault: "trainer", probeError: probe.error };
  }

  /** The probe job, after a training that failed with an error (what a full disk gives), preceded by the disk's room
   *  for a training's output (disk-room.ts): a round whose output did not fit is the host's, never its rows'. */
  async #probe(manifest: Manifest, failedWithError: boolean): Promise<ProbeResult> {
    if (failedWithError) {
      const room = await diskRoom(this.ctx.config.workDir, await trainingOutputBytes(manifest.parent.path));
      if (room !== null) return { ok: false, error: room };
    }
    return this.deps.probe.run(manifest.parent.path ?? "", manifest.reference.path ?? "");
  }

  async #degradedWait(cause: string, backoff: Backoff): Promise<void> {
    const { ctx } = this;
    setDegraded(ctx, cause);
    setPhase(ctx, "waiting");
    ctx.log.warn({ cause, retryInS: backoff.nextMs / 1000 }, "degraded: retrying the round later; no rollout is rejected for it");
    await backoff.wait(ctx.stopSignal);
  }

  /** Poison rollouts of a round that keeps failing while the probe trains; null when the trainer failed meanwhile. */
  async #isolate(manifest: Manifest, dir: string, error: string, backoff: Backoff): Promise<Culprit[] | null> {
    const { ctx } = this;
    setPhase(ctx, "isolating");
    ctx.log.warn({ round: manifest.round, rollouts: manifest.events.length }, "isolating the rollouts the round fails on");
    let parts = 0;
    let partFailedWithError = false;
    try {
      const culprits = await isolatePoison(manifest, dir, {
        part: async (data, label) => {
          this.#throwIfStopping();
          const out = join(dir, `isolate.out-${process.pid}-${++parts}`);
          try {
            const stats = await this.deps.trainer.train(this.#job(manifest, dir, data, out), { label, logFile: join(dir, `isolate.${parts}.log`) });
            const garbage = nonFiniteStat(stats); // a part that diverges fails as one that crashes does
            partFailedWithError = false;
            return garbage === null ? null : `its statistics are not finite (${garbage})`;
          } catch (err) {
            partFailedWithError = true;
            return (err as Error).message;
          } finally {
            await removeJobOutput(out);
          }
        },
        probe: () => this.#probe(manifest, partFailedWithError),
      }, error);
      ctx.log.warn({ round: manifest.round, parts, culprits: culprits.map((c) => c.id) }, "isolation done");
      return culprits;
    } catch (err) {
      if (!(err instanceof TrainerFaultError)) throw err;
      this.#throwIfStopping();
      await this.#degradedWait(err.message, backoff);
      return null;
    }
  }

  /** The round without the rollouts its trained attempt in `outDir` shows far from the rest (logp-outliers.ts) when
   *  its statistics fail a log-prob gate, that attempt removed; null when they do not, or there are none (or the
   *  trainer wrote no gaps: said once). */
  async #withoutOutliers(manifest: Manifest, stats: PpoStats, dir: string, outDir: string): Promise<Manifest | null> {
    const { gate } = this.ctx.config;
    if (!failsLogpGate(stats, gate)) return null;
    const check = await logpOutliers(manifest, outDir, gate.maxRolloutLogpGapAbs);
    if (check.kind === "unchecked" && !this.#gapsUnchecked) {
      this.#gapsUnchecked = true;
      this.ctx.log.warn({ round: manifest.round, why: check.why }, "gate.maxRolloutLogpGapAbs: rollouts not checked one by one");
    }
    if (check.kind !== "outliers") return null;
    await rm(outDir, { recursive: true, force: true });
    return this.#withoutPoison(manifest, dir, check.culprits);
  }

  /** train.jsonl as the manifest says (its sha256): a daemon killed while rollouts were taken out of the round wrote
   *  the new manifest but not the rows that go with it; they are rebuilt from the manifest's events (and should the
   *  rebuilt rows differ still — advantages computed otherwise since — the manifest names them, as replay checks). */
  async #rowsAsManifest(manifest: Manifest, dir: string): Promise<Manifest> {
    const file = join(dir, TRAIN_FILE);
    const text = await readFile(file, "utf8").catch(() => null);
    if (text !== null && sha256(text) === manifest.train_sha256) return manifest;
    const rebuilt = trainJsonl(await this.#rolloutsOf(manifest.round, manifest.events), manifest.advantage);
    await writeFileAtomic(file, rebuilt);
    const same = sha256(rebuilt) === manifest.train_sha256;
    this.ctx.log.warn({ round: manifest.round, rows: manifest.rows, same }, "train.jsonl did not match the round's manifest: rebuilt from its events");
    if (same) return manifest;
    const named = updated(manifest, { train_sha256: sha256(rebuilt) });
    await writeManifest(dir, named);
    return named;
  }

  /** The round without its poison rollouts: train.jsonl rebuilt from the rest (their advantages recomputed). */
  async #withoutPoison(manifest: Manifest, dir: string, culprits: Culprit[]): Promise<Manifest> {
    const { ctx } = this;
    const bad = new Set(culprits.map((c) => c.seq));
    const events = manifest.events.filter((e) => !bad.has(e.seq));
    const items = await this.#rolloutsOf(manifest.round, events);
    const text = trainJsonl(items, manifest.advantage);
    const next = updated(manifest, {
      status: "assembled", events, poisoned: [...manifest.poisoned, ...culprits],
      rows: events.reduce((n, e) => n + e.rows, 0), train_sha256: sha256(text),
    });
    // the manifest first: a daemon killed before train.jsonl follows rebuilds it from the manifest (#rowsAsManifest)
    await writeManifest(dir, next);
    await pausePoint("isolated", manifest.round, ctx.log);
    await writeFileAtomic(join(dir, TRAIN_FILE), text);
    for (const c of culprits) {
      await Promise.all(Array.from({ length: c.rows }, (_, k) => rm(join(dir, "frames", frameFileName(c.seq, k)), { force: true })));
    }
    ctx.log.warn({ round: manifest.round, removed: culprits.map((c) => ({ id: c.id, reason: c.reason, error: c.error })), rows: next.rows }, "rollouts taken out of the round");
    await ctx.events.round({
      type: "round.isolated", round: manifest.round, rows: next.rows, sha256: events.length > 0 ? next.train_sha256 : null,
      poisoned: culprits.map((c) => ({ seq: c.seq, id: c.id, error: c.error, reason: c.reason })),
    });
    return next;
  }

  /** The round's rollouts; those of a resumed round are read back from the stream, through NATS outages as every
   *  other step of a round is (a blip there ended the daemon). */
  async #rolloutsOf(round: number, events: Manifest["events"]): Promise<RoundRollout[]> {
    const { ctx } = this;
    const missing = events.filter((e) => !this.#known.has(e.seq));
    const read = missing.length === 0 ? [] : await retrying(() => this.deps.rollouts(round, missing), {
      what: `rollouts of round ${round}`, log: ctx.log, health: this.#health(), stop: ctx.stopSignal, fatal: (err) => !isTransient(err),
    });
    for (const item of read) this.#known.set(item.seq, item);
    return events.map((e) => this.#known.get(e.seq) as RoundRollout);
  }

  /** `degraded` while a step that retries forever keeps failing (retry.ts), ok again once it succeeds. */
  #health(): RetryOptions["health"] {
    const { ctx } = this;
    let cause: string | null = null;
    return {
      after: 5,
      degraded: (c) => setDegraded(ctx, (cause = c)),
      recovered: () => {
        if (degradedCause(ctx, "round") === cause) setHealthy(ctx);
      },
    };
  }

  #throwIfStopping() {
    if (this.ctx.stopping) throw new StopRequestedError("stopping: the round stays pending for the next start");
  }

  // -------------------------------------------------------------------------------------------------------------
  // gate, commit, publish

  #judge(trained: Trained): Verdict {
    if (trained.stats === null) {
      return { outcome: "empty", reason: `every rollout was taken out of the round (${trained.manifest.poisoned.length}: ${[...new Set(trained.manifest.poisoned.map((p) => p.reason))].join(", ")})`, stats: null, outDir: null };
    }
    const gate = checkGate(trained.stats, this.ctx.config.gate);
    return gate.ok
      ? { outcome: "published", reason: null, stats: trained.stats, outDir: trained.outDir }
      : { outcome: "rejected", reason: gate.reason, stats: trained.stats, outDir: trained.outDir };
  }

  /** The accepted adapter becomes <round>/adapter/ (renamed: never torn); a rejected one is kept for inspection. */
  async #placeAdapter(verdict: Verdict, dir: string): Promise<{ path: string; sha256: string } | null> {
    if (verdict.outDir === null) return null;
    const target = join(dir, verdict.outcome === "published" ? "adapter" : "adapter.rejected");
    await rm(target, { recursive: true, force: true });
    await rename(verdict.outDir, target);
    if (verdict.outcome !== "published") return null;
    return { path: target, sha256: await sha256File(join(target, "adapter_model.safetensors")) };
  }

  /** Rejections of the rollouts taken out are recorded before the commit (idempotent by message id), terminated after it. */
  async #recordRejections(manifest: Manifest): Promise<void> {
    const { ctx } = this;
    if (manifest.poisoned.length === 0) return;
    // a successor may have trained these rollouts in its own mix meanwhile: a rejection recorded now would be a second end
    await retrying(() => this.#assertStillActive(), { what: `the lease before round ${manifest.round}'s rejections`, log: ctx.log, health: this.#health(), stop: ctx.stopSignal, fatal: isSuperseded });
    for (const p of manifest.poisoned) {
      await retrying(() => ctx.events.rejected({ seq: p.seq, id: p.id, reason: p.reason, message: p.error, round: manifest.round }), {
        what: `${p.reason} rejection`, log: ctx.log, health: this.#health(), stop: ctx.stopSignal,
      });
    }
  }

  /**
   * Before a write a successor reads (rejections, ids, objects): the lease held, and the state record still the one
   * this round continues. A lease that expired and was free is taken back (lease.ts), though another daemon may have
   * held it and committed meanwhile: the commit's compare-and-set would refuse this round, but only after those writes.
   */
  async #assertStillActive(): Promise<void> {
    await this.deps.lease?.assertHeld();
    await this.deps.states.assertAt(this.ctx.state.revision);
  }

  /** The rollout stream's last sequence: the rollouts up to it reached the stream before what is being committed is
   *  announced (staleness.ts). */
  async #streamSeq(): Promise<number> {
    return (await this.ctx.nats.jsm.streams.info(ROLLOUT_STREAM)).state.last_seq;
  }

  async #nextState(manifest: Manifest, verdict: Verdict, adapter: { path: string; sha256: string } | null, outcomes: StateRecord["outcomes"]): Promise<StateRecord> {
    // a rollback decided in this commit comes first: the round's own adapter, when it has one, continues its target
    const committed = this.ctx.state.record;
    const streamSeq = await this.#streamSeq();
    const prev = verdict.rollback ? rolledBack(committed, verdict.rollback.target, verdict.rollback.info, streamSeq) : committed;
    const floor = await this.deps.ackFloor();
    const seqs = [...manifest.events, ...manifest.poisoned].map((e) => e.seq);
    const adapterRound = adapter ? manifest.round : prev.adapter.round;
    const lineage = adapter ? [...prev.lineage.filter((e) => e.round !== manifest.round), { round: manifest.round, parent: prev.adapter.round, path: adapter.path, sha256: adapter.sha256 }] : prev.lineage;
    const next: StateRecord = {
      ...prev,
      round: manifest.round,
      outcome: verdict.outcome,
      adapter: adapter ? { round: manifest.round, path: adapter.path, sha256: adapter.sha256 } : prev.adapter,
      // a target trained from in this very commit is not served on its own: the round's adapter follows at once, so
      // staleness counts one adapter announced, not two (late rollouts of the regressed one stay one behind)
      recent_adapters: adapter ? withRecentAdapter(committed, manifest.round, adapter.sha256, streamSeq) : prev.recent_adapters,
      unpublished: adapter ? prev.unpublished : withUnpublished(prev, manifest.round),
      last_seq: Math.max(prev.last_seq, ...seqs),
      ack_floor: Math.max(prev.ack_floor, floor ?? 0),
      outcomes,
      lineage: keptLineage(lineage, adapterRound, this.ctx.config.guard.baselines + 2),
      ...(verdict.rollback && prev.rollback ? { rollback: { ...prev.rollback, round: manifest.round } } : {}),
      at: new Date().toISOString(),
    };
    return next;
  }

  async #afterCommit(manifest: Manifest, verdict: Verdict, revision: number, dir: string, clock: PhaseClock): Promise<void> {
    const { ctx } = this;
    const round = manifest.round;
    // committed: the folder's manifest says so once the disk takes it (a restart marks it, recovery.ts)
    await retrying(() => writeManifest(dir, manifest), { what: `manifest of committed round ${round}`, log: ctx.log, health: this.#health(), stop: ctx.stopSignal, fatal: (err) => !isTransient(err) });
    clock.lap("manifest");
    ctx.applied.add(round, manifest.events);
    for (const p of manifest.poisoned) {
      ctx.rejectedSeqs.add(p.seq);
      ctx.held.term([p.seq], p.reason);
      ctx.metrics.rejected.inc({ reason: p.reason });
    }
    ctx.tally.rejected += manifest.poisoned.length;
    const confirmed = await ctx.held.ack(manifest.events.map((e) => e.seq));
    ctx.log.debug({ round, confirmed, events: manifest.events.length }, "round acked");
    ctx.metrics.rounds.inc({ outcome: verdict.outcome });
    ctx.metrics.committedRound.set(round);
    if (verdict.stats) ctx.metrics.setLastStats(verdict.stats);
    ctx.tally.last = verdict.stats === null ? null : lastRoundStats(round, verdict.outcome, verdict.stats);
    const gpu = verdict.stats?.gpu_memory_bytes;
    if (typeof gpu === "number") ctx.tally.gpuMemory = gpu;
    clock.lap("acks");
    ctx.log.info({ round, outcome: verdict.outcome, reason: verdict.reason, revision, phasesS: clock.laps() }, "round committed");
    await ctx.events.round({ type: "round.committed", round, outcome: verdict.outcome, revision });
    if (verdict.outcome === "rejected") await ctx.events.round({ type: "round.rejected", round, reason: verdict.reason ?? "", ...(verdict.stats ? { stats: verdict.stats } : {}) });
  }

  /** A round committed as published whose announcement a kill cut short (daemon.ts): its statistics read — again
   *  while the disk fails their read, degraded after a few tries — then published. */
  async republish(record: StateRecord): Promise<void> {
    const { ctx } = this;
    const round = record.adapter.round;
    // announced already, its event too (the usual start): nothing to read
    const last = await retrying(() => lastAnnouncement(ctx.nats.jsm, ctx.policy), { what: "the last announcement", log: ctx.log, health: this.#health(), stop: ctx.stopSignal });
    if (last !== null && (last.round > round || (last.round === round && (await this.#lastPublishedEvent()) >= round))) return;
    const stats = await retrying(() => committedStats(record, ctx.config.workDir), {
      what: `statistics of round ${round}`, log: ctx.log, health: this.#health(), stop: ctx.stopSignal, fatal: (err) => !isDiskFault(err),
    });
    await this.publish(round, record.adapter.path, stats);
  }

  /** Idempotent: publishes round's adapter unless the adapters subject already announces it (or a later one). */
  async publish(round: number, adapterDir: string, stats: PpoStats): Promise<void> {
    const { ctx } = this;
    setPhase(ctx, "publishing");
    const started = performance.now();
    const parent = ctx.state.record.lineage.find((e) => e.round === round)?.parent ?? undefined;
    const stored = ctx.state.record.adapter.round === round ? ctx.state.record.adapter.objects : undefined;
    const result = await retrying(() => publishAdapter(ctx.nats, this.deps.adapters, { policy: ctx.policy, round, adapterDir, stats, ...(parent == null ? {} : { parent }), ...(stored ? { stored } : {}) }, {
      afterPut: () => pausePoint("publishing", round, ctx.log),
    }), { what: `publish of round ${round}`, log: ctx.log, health: this.#health(), stop: ctx.stopSignal }).catch((err: unknown) => {
      if (!ctx.stopping) throw err;
      // committed and acked already: the next start publishes it (daemon.ts), so a stop is not a failure
      ctx.log.warn({ err, round }, "publish interrupted by the stop; the next start publishes this round");
      return null;
    });
    if (result === null) return;
    ctx.metrics.stepSeconds.observe({ step: "publish" }, (performance.now() - started) / 1000);
    if (result.published) {
      ctx.log.info({ round, name: result.event.name, sha256: result.event.sha256 }, "adapter published");
      await pausePoint("announced", round, ctx.log);
    } else {
      ctx.log.info({ round, lastRound: result.lastRound }, "adapter already announced");
      // announced by an earlier attempt whose reply was lost, or by a daemon killed before the round's event:
      // the event is owed once (a later announcement, or the event already there, owes nothing)
      const owed = result.lastRound === round && (await this.#lastPublishedEvent()) < round;
      if (!owed) return;
    }
    if (this.#lastArrival !== null) ctx.metrics.roundLatency.observe((Date.now() - this.#lastArrival) / 1000);
    await ctx.events.round({ type: "round.published", round, name: adapterName(ctx.policy, round) });
  }

  /** The last round.published event's round; a failed read counts as none (the event carries a Nats-Msg-Id: a
   *  second copy within the stream's duplicate window is dropped, so "none" errs on the side of sending it). */
  async #lastPublishedEvent(): Promise<number> {
    return lastPublishedRoundEvent(this.ctx.nats.jsm, this.ctx.policy).catch((err: unknown) => {
      this.ctx.log.warn({ err }, "could not read the last round.published event");
      return 0;
    });
  }
}

/** The round's manifest as it reads once committed (stored before the commit, written to disk after it). */
/** Removes the round folder's attempt outputs (attemptOutDir) but `keep`. */
async function removeAttemptsExcept(dir: string, keep: string | null): Promise<void> {
  const names = await readdir(dir).catch(() => [] as string[]);
  const stale = names.filter((n) => n.startsWith("adapter.tmp-") && join(dir, n) !== keep);
  await Promise.all(stale.map((n) => rm(join(dir, n), { recursive: true, force: true })));
}

function committedManifest(manifest: Manifest, verdict: Verdict): Manifest {
  return updated(manifest, {
    status: "committed", outcome: verdict.outcome,
    ...(verdict.reason ? { reason: verdict.reason } : {}), ...(verdict.stats ? { stats: verdict.stats } : {}),
  });
}

function lastRoundStats(round: number, outcome: RoundOutcome, stats: PpoStats): LoopContext["tally"]["last"] {
  return { round, outcome, pg_loss: stats.pg_loss, kl: stats.kl, clip_frac: stats.clip_frac, logp_gap: stats.logp_gap, logp_gap_abs: stats.logp_gap_abs };
}

/** Another daemon holds the lease or committed past this one: nothing of this round may be written. */
function isSuperseded(err: unknown): boolean {
  return isLeaseError(err) || isStateConflict(err);
}
