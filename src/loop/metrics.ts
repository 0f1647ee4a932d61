// Prometheus metrics of the daemon (prom-client): standard Node process metrics under their usual names, one gauge
// per statistic of the last round with its unit in the name, counters by outcome and reason initialised at 0,
// histograms of round latency and train time, build info. ops/grafana-dashboard.json charts them (a test checks
// that every query names a metric that exists).
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import { codesOf, Phase, RejectReason, RoundOutcome, type PpoStats } from "../contract/index.js";
import { PACKAGE_VERSION } from "../version.js";

/** Seconds, from a second to two hours: a round trains in seconds (CPU toy) to many minutes (9B). */
const DURATION_BUCKETS = [0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 3600, 7200];

export class Metrics {
  readonly registry = new Registry();
  readonly #reg = [this.registry];
  readonly buildInfo = new Gauge({ name: "rlloop_build_info", help: "1, with the version of rlloop and of Node.js as labels", labelNames: ["version", "node"], registers: this.#reg });
  readonly accepted = new Counter({ name: "rlloop_rollouts_accepted_total", help: "rollouts accepted into a round", registers: this.#reg });
  readonly acceptedRows = new Counter({ name: "rlloop_rows_accepted_total", help: "decision rows accepted into a round", registers: this.#reg });
  readonly rejected = new Counter({ name: "rlloop_rollouts_rejected_total", help: "rollouts rejected, by reason", labelNames: ["reason"], registers: this.#reg });
  readonly rounds = new Counter({ name: "rlloop_rounds_total", help: "committed rounds, by outcome", labelNames: ["outcome"], registers: this.#reg });
  readonly committedRound = new Gauge({ name: "rlloop_committed_round", help: "last committed round", registers: this.#reg });
  readonly bufferedRows = new Gauge({ name: "rlloop_buffered_rows", help: "rows in the open round", registers: this.#reg });
  readonly bufferedRollouts = new Gauge({ name: "rlloop_buffered_rollouts", help: "rollouts in the open round", registers: this.#reg });
  readonly pendingAcks = new Gauge({ name: "rlloop_pending_acks", help: "messages held unacked (open and training rounds)", registers: this.#reg });
  readonly rolloutsWaiting = new Gauge({ name: "rlloop_rollouts_waiting", help: "rollouts whose last judgement failed for a transient reason (NATS, the host, the configuration): nak'd, judged again later", registers: this.#reg });
  readonly copiesWaiting = new Gauge({ name: "rlloop_copies_waiting", help: "rollouts whose id another copy holds in the open or training round: nak'd, judged again after that round (a duplicate if it trained that copy)", registers: this.#reg });
  readonly roundEventsUnpublished = new Gauge({ name: "rlloop_round_events_unpublished", help: "round lifecycle events JetStream has not confirmed yet: published again in order until it does (a NATS outage)", registers: this.#reg });
  readonly streamBytes = new Gauge({ name: "rlloop_stream_bytes", help: "bytes the daemon's streams hold (RLLOOP_ROLLOUTS keeps every rollout for stream.maxAgeS, handled or not): size JetStream's store by it", labelNames: ["stream"] as const, registers: this.#reg });
  readonly consumerAckPending = new Gauge({ name: "rlloop_consumer_ack_pending", help: "messages the rollouts consumer has handed out unacked, by the server's count (the rounds', those being judged, those waiting to be judged again)", registers: this.#reg });
  readonly consumerMaxAckPending = new Gauge({ name: "rlloop_consumer_max_ack_pending", help: "the consumer's max_ack_pending: at it, the server hands out no new rollout", registers: this.#reg });
  readonly phase = new Gauge({ name: "rlloop_phase", help: "1 for the current phase", labelNames: ["phase"], registers: this.#reg });
  readonly degraded = new Gauge({ name: "rlloop_degraded", help: "1 while the daemon is degraded: the trainer or its host fails, a step after training keeps failing, a frames root fails as a host does, or rollouts keep failing to be judged for a reason not theirs", registers: this.#reg });
  readonly gpuMemoryBytes = new Gauge({ name: "rlloop_gpu_memory_bytes", help: "peak GPU memory of the last trained round, bytes (rank 0)", registers: this.#reg });
  readonly last = {
    pg_loss: new Gauge({ name: "rlloop_last_round_pg_loss", help: "last trained round's policy-gradient loss", registers: this.#reg }),
    kl: new Gauge({ name: "rlloop_last_round_kl", help: "last trained round's k3 KL to the reference adapter", registers: this.#reg }),
    clip_frac: new Gauge({ name: "rlloop_last_round_clip_fraction", help: "last trained round's fraction of clipped ratios", registers: this.#reg }),
    logp_gap: new Gauge({ name: "rlloop_last_round_logp_gap", help: "last trained round's mean trainer − sampler log-prob of the code", registers: this.#reg }),
    logp_gap_abs: new Gauge({ name: "rlloop_last_round_logp_gap_abs", help: "last trained round's mean |trainer − sampler log-prob|", registers: this.#reg }),
    rows: new Gauge({ name: "rlloop_last_round_rows", help: "rows the last round trained", registers: this.#reg }),
    train_s: new Gauge({ name: "rlloop_last_round_train_seconds", help: "the last round's training time, seconds", registers: this.#reg }),
  } as const;
  // issue 23: live outcomes of the adapters served lately, and the guard's rollbacks
  readonly rollbacks = new Counter({ name: "rlloop_rollbacks_total", help: "rollbacks announced, by trigger (guard, manual)", labelNames: ["trigger"], registers: this.#reg });
  readonly adapterRollouts = new Gauge({ name: "rlloop_adapter_rollouts", help: "committed rollouts served by each recent adapter", labelNames: ["adapter"], registers: this.#reg });
  readonly adapterReward = new Gauge({ name: "rlloop_adapter_reward_mean", help: "mean episode reward of the committed rollouts each recent adapter served", labelNames: ["adapter"], registers: this.#reg });
  readonly adapterRewardSd = new Gauge({ name: "rlloop_adapter_reward_sd", help: "their standard deviation", labelNames: ["adapter"], registers: this.#reg });
  readonly adapterSuccess = new Gauge({ name: "rlloop_adapter_success_rate", help: "fraction with reward >= guard.successThreshold", labelNames: ["adapter"], registers: this.#reg });
  readonly guardRegressed = new Gauge({ name: "rlloop_guard_regressed", help: "1 while the live-outcome guard finds the serving lineage worse than an ancestor (rolled back when guard.enabled)", registers: this.#reg });
  readonly roundLatency = new Histogram({
    name: "rlloop_round_latency_seconds", help: "a round's last rollout in → its adapter announced, seconds", buckets: DURATION_BUCKETS, registers: this.#reg,
  });
  readonly trainSeconds = new Histogram({ name: "rlloop_train_seconds", help: "successful training attempts, seconds", buckets: DURATION_BUCKETS, registers: this.#reg });
  readonly stepSeconds = new Histogram({
    name: "rlloop_round_step_seconds", help: "duration of round steps", labelNames: ["step"], buckets: [0.01, 0.1, 0.5, 1, 5, 15, 60, 300, 1200, 3600], registers: this.#reg,
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    this.buildInfo.set({ version: PACKAGE_VERSION, node: process.version }, 1);
    // every label value exists from the start, at 0: a rate() over a reason that never happened yet is 0, not absent
    for (const reason of codesOf(RejectReason)) this.rejected.inc({ reason }, 0);
    for (const outcome of codesOf(RoundOutcome)) this.rounds.inc({ outcome }, 0);
    for (const step of ["assemble", "train", "commit", "publish"]) this.stepSeconds.zero({ step });
    for (const trigger of ["guard", "manual"]) this.rollbacks.inc({ trigger }, 0);
    this.guardRegressed.set(0);
    this.setPhase("starting");
    this.degraded.set(0);
  }

  setPhase(current: Phase): void {
    for (const p of codesOf(Phase)) this.phase.set({ phase: p }, p === current ? 1 : 0);
  }

  /** The gauges of the adapters whose outcomes the stats report (label `adapter` = its round); others removed. */
  setOutcomes(outcomes: ReadonlyArray<{ round: number; count: number; mean: number | null; sd: number | null; success_rate: number | null }>, regressed: boolean): void {
    for (const g of [this.adapterRollouts, this.adapterReward, this.adapterRewardSd, this.adapterSuccess]) g.reset();
    for (const o of outcomes) {
      const labels = { adapter: String(o.round) };
      this.adapterRollouts.set(labels, o.count);
      if (o.mean !== null) this.adapterReward.set(labels, o.mean);
      if (o.sd !== null) this.adapterRewardSd.set(labels, o.sd);
      if (o.success_rate !== null) this.adapterSuccess.set(labels, o.success_rate);
    }
    this.guardRegressed.set(regressed ? 1 : 0);
  }

  setLastStats(stats: PpoStats): void {
    for (const [key, gauge] of Object.entries(this.last)) gauge.set(stats[key as keyof typeof this.last]);
    if (stats.gpu_memory_bytes !== undefined) this.gpuMemoryBytes.set(stats.gpu_memory_bytes);
  }
}
