// One round from closed buffer (or pending manifest) to published adapter (DESIGN.md data flow steps 4-8):
// assemble → train (up to trainer.maxAttempts) → gate → commit (KV compare-and-set) → ack → publish.
// The order is the guarantee: nothing is acked before the commit, nothing is published before it, and every
// step after the commit is idempotent, so a restart at any point redoes the uncommitted part only.
import { rename, rm } from "node:fs/promises";
import { join } from "node:path";
import type { ObjectStore } from "@nats-io/obj";
import { assembleRound, TRAIN_FILE, type RoundRollout } from "./assemble.js";
import { configHash } from "./config.js";
import { setPhase, type Buffered, type LoopContext } from "./context.js";
import { isStateConflict } from "./errors.js";
import { sha256File } from "../files.js";
import { findFinishedAttempt } from "./finished-attempt.js";
import { checkGate } from "./gate.js";
import { updated, writeManifest, type Manifest } from "./manifest.js";
import { incomingDir, roundDir } from "./paths.js";
import { publishAdapter } from "./publish.js";
import { retrying } from "./retry.js";
import type { PpoStats, RoundOutcome, RoundTrigger } from "./schema.js";
import { withRecentAdapter, type StateRecord, type StateStore } from "./state.js";
import { pausePoint } from "./test-hooks.js";
import type { RoundTrainer } from "./trainer.js";

export interface RunnerDeps {
  ctx: LoopContext;
  trainer: RoundTrainer;
  states: StateStore;
  adapters: ObjectStore;
  /** current consumer ack floor, recorded in the state (null when unknown) */
  ackFloor: () => Promise<number | null>;
}

interface Verdict {
  outcome: RoundOutcome;
  reason: string | null;
  stats: PpoStats | null;
  /** the trained adapter's folder, when one exists */
  outDir: string | null;
}

export class RoundRunner {
  constructor(private readonly deps: RunnerDeps) {}

  private get ctx() { return this.deps.ctx; }

  /** A closed buffer: assemble its folder, then run it. */
  async runClosed(round: number, entries: Buffered[], trigger: RoundTrigger): Promise<void> {
    const { ctx } = this;
    setPhase(ctx, "assembling");
    const state = ctx.state.record;
    const rows = entries.reduce((n, e) => n + e.rows, 0);
    await ctx.events.round({ type: "round.closed", round, trigger, rows, rollouts: entries.length });
    const started = performance.now();
    const items: RoundRollout[] = entries.map((e) => ({ seq: e.seq, rollout: e.rollout }));
    const dir = roundDir(ctx.config.workDir, ctx.policy, round);
    const manifest = await assembleRound({
      round, policy: ctx.policy, dir, incoming: incomingDir(ctx.config.workDir, ctx.policy), items, trigger,
      advantage: ctx.config.advantage,
      parent: { round: state.adapter.round, path: state.adapter.path, sha256: state.adapter.sha256 },
      reference: { path: state.reference.path, sha256: state.reference.sha256 },
      configHash: configHash(ctx.config), seed: ctx.config.trainer.seed + round,
      beforeManifest: () => pausePoint("assembling", round, ctx.log),
    });
    ctx.metrics.stepSeconds.observe({ step: "assemble" }, (performance.now() - started) / 1000);
    ctx.log.info({ round, rows, rollouts: entries.length, trigger, sha256: manifest.trainSha256 }, "round assembled");
    await ctx.events.round({ type: "round.assembled", round, rows, sha256: manifest.trainSha256, dir });
    await this.run(manifest);
  }

  /** Train, gate, commit, ack, publish a round that has a manifest. */
  async run(manifest: Manifest): Promise<void> {
    const { ctx } = this;
    const dir = roundDir(ctx.config.workDir, ctx.policy, manifest.round);
    const trained = await this.#train(manifest, dir);
    await pausePoint("training", manifest.round, ctx.log);
    const verdict = this.#judge(trained);
    const adapter = await this.#placeAdapter(verdict, dir);
    if (verdict.outcome === "failed") await this.#rejectRollouts(trained.manifest, verdict.reason ?? "training failed");
    setPhase(ctx, "committing");
    const next = await this.#nextState(trained.manifest, verdict, adapter);
    const revision = await retrying(() => this.deps.states.commit(next, ctx.state.revision), {
      what: `commit of round ${manifest.round}`, log: ctx.log, fatal: isStateConflict,
    });
    ctx.state = { record: next, revision };
    await pausePoint("committed", manifest.round, ctx.log);
    await this.#afterCommit(trained.manifest, verdict, revision, dir);
    if (verdict.outcome === "published" && adapter) await this.publish(manifest.round, adapter.path, verdict.stats as PpoStats);
  }

  async #train(manifest: Manifest, dir: string): Promise<{ manifest: Manifest; stats: PpoStats | null; outDir: string | null; error: string | null }> {
    const { ctx } = this;
    setPhase(ctx, "training");
    if (manifest.status === "training" && manifest.attempts > 0) {
      const finished = await findFinishedAttempt(dir, manifest.attempts);
      if (finished) {
        ctx.log.info({ round: manifest.round, attempt: manifest.attempts, outDir: finished.outDir }, "using the finished training of the previous run's last attempt");
        return { manifest, stats: finished.stats, outDir: finished.outDir, error: null };
      }
    }
    let current = manifest;
    let error: string | null = null;
    for (let attempt = manifest.attempts + 1; attempt <= ctx.config.trainer.maxAttempts; attempt++) {
      current = updated(current, { status: "training", attempts: attempt });
      await writeManifest(dir, current);
      await ctx.events.round({ type: "round.training", round: current.round, attempt });
      const outDir = join(dir, `adapter.tmp-${process.pid}-${attempt}`);
      const started = performance.now();
      try {
        const stats = await this.deps.trainer.train({
          round: current.round, roundDir: dir, trainJsonl: join(dir, TRAIN_FILE),
          parentAdapter: current.parent.path ?? "", refAdapter: current.reference.path ?? "",
          outDir, seed: current.seed, attempt,
        });
        ctx.metrics.stepSeconds.observe({ step: "train" }, (performance.now() - started) / 1000);
        ctx.log.info({ round: current.round, attempt, stats }, "round trained");
        await ctx.events.round({ type: "round.trained", round: current.round, stats });
        return { manifest: current, stats, outDir, error: null };
      } catch (err) {
        error = (err as Error).message;
        ctx.log.error({ err, round: current.round, attempt }, "trainer attempt failed");
      }
    }
    return { manifest: current, stats: null, outDir: null, error: error ?? `trainer.maxAttempts (${ctx.config.trainer.maxAttempts}) already used` };
  }

  #judge(trained: { stats: PpoStats | null; outDir: string | null; error: string | null; manifest: Manifest }): Verdict {
    if (trained.stats === null) {
      return { outcome: "failed", reason: `training failed ${trained.manifest.attempts} time(s): ${trained.error?.split("\n")[0]}`, stats: null, outDir: null };
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

  async #rejectRollouts(manifest: Manifest, reason: string): Promise<void> {
    const { ctx } = this;
    for (const e of manifest.events) {
      await retrying(() => ctx.events.rejected({ seq: e.seq, id: e.id, reason: "round_failed", message: reason, round: manifest.round }), {
        what: "round_failed rejection", log: ctx.log,
      });
    }
  }

  async #nextState(manifest: Manifest, verdict: Verdict, adapter: { path: string; sha256: string } | null): Promise<StateRecord> {
    const prev = this.ctx.state.record;
    const floor = await this.deps.ackFloor();
    const lastSeq = Math.max(prev.lastSeq, ...manifest.events.map((e) => e.seq));
    return {
      ...prev,
      round: manifest.round,
      outcome: verdict.outcome,
      adapter: adapter ? { round: manifest.round, path: adapter.path, sha256: adapter.sha256 } : prev.adapter,
      recentAdapters: adapter ? withRecentAdapter(prev, manifest.round, adapter.sha256) : prev.recentAdapters,
      lastSeq,
      ackFloor: Math.max(prev.ackFloor, floor ?? 0),
      at: new Date().toISOString(),
    };
  }

  async #afterCommit(manifest: Manifest, verdict: Verdict, revision: number, dir: string): Promise<void> {
    const { ctx } = this;
    const round = manifest.round;
    await writeManifest(dir, updated(manifest, {
      status: "committed", outcome: verdict.outcome,
      ...(verdict.reason ? { reason: verdict.reason } : {}), ...(verdict.stats ? { stats: verdict.stats } : {}),
    }));
    ctx.applied.add(round, manifest.events);
    const seqs = manifest.events.map((e) => e.seq);
    if (verdict.outcome === "failed") {
      for (const seq of seqs) ctx.rejectedSeqs.add(seq);
      ctx.held.term(seqs);
      ctx.metrics.rejected.inc({ reason: "round_failed" }, seqs.length);
      ctx.tally.rejected += seqs.length;
    } else {
      const confirmed = await ctx.held.ack(seqs);
      ctx.log.debug({ round, confirmed, events: seqs.length }, "round acked");
    }
    ctx.metrics.rounds.inc({ outcome: verdict.outcome });
    ctx.metrics.committedRound.set(round);
    if (verdict.stats) ctx.metrics.setLastStats(verdict.stats);
    ctx.tally.last = lastRoundStats(round, verdict.outcome, verdict.stats);
    const gpu = verdict.stats?.["gpu_memory_bytes"];
    if (typeof gpu === "number") ctx.tally.gpuMemory = gpu;
    ctx.log.info({ round, outcome: verdict.outcome, reason: verdict.reason, revision }, "round committed");
    await ctx.events.round({ type: "round.committed", round, outcome: verdict.outcome, revision });
    if (verdict.outcome === "rejected") await ctx.events.round({ type: "round.rejected", round, reason: verdict.reason ?? "", ...(verdict.stats ? { stats: verdict.stats } : {}) });
    if (verdict.outcome === "failed") await ctx.events.round({ type: "round.failed", round, reason: verdict.reason ?? "", attempts: manifest.attempts });
  }

  /** Idempotent: publishes round's adapter unless the adapters subject already announces it (or a later one). */
  async publish(round: number, adapterDir: string, stats: PpoStats): Promise<void> {
    const { ctx } = this;
    setPhase(ctx, "publishing");
    const started = performance.now();
    const result = await retrying(() => publishAdapter(ctx.nats, this.deps.adapters, { policy: ctx.policy, round, adapterDir, stats }, {
      afterPut: () => pausePoint("publishing", round, ctx.log),
    }), { what: `publish of round ${round}`, log: ctx.log, stopped: () => ctx.stopping }).catch((err: unknown) => {
      if (!ctx.stopping) throw err;
      // committed and acked already: the next start publishes it (daemon.ts #resumeWork), so a stop is not a failure
      ctx.log.warn({ err, round }, "publish interrupted by the stop; the next start publishes this round");
      return null;
    });
    if (result === null) return;
    ctx.metrics.stepSeconds.observe({ step: "publish" }, (performance.now() - started) / 1000);
    if (!result.published) {
      ctx.log.info({ round, lastRound: result.lastRound }, "adapter already announced");
      return;
    }
    ctx.log.info({ round, name: result.event.name, sha256: result.event.sha256 }, "adapter published");
    await ctx.events.round({ type: "round.published", round, name: result.event.name });
  }
}

function lastRoundStats(round: number, outcome: RoundOutcome, stats: PpoStats | null): LoopContext["tally"]["last"] {
  const finite = (v: number | undefined) => (typeof v === "number" && Number.isFinite(v) ? v : null);
  return {
    round, outcome,
    pg_loss: finite(stats?.pg_loss), kl: finite(stats?.kl), clip_frac: finite(stats?.clip_frac),
    logp_gap: finite(stats?.logp_gap), logp_gap_abs: finite(stats?.logp_gap_abs),
  };
}
