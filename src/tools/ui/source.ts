// The web UI's only window on the loop, and its only reader of the wire contract: NATS in, UiStore calls out. It
// reads what any monitor may read (a monitor runs anywhere the loop's NATS is reachable; it never talks to the
// daemon's disk or process):
//   - the events stream RLLOOP_EVENTS from its start, one ordered consumer per kind of event (round lifecycle,
//     rejections, adapter announcements — published adapters and rollbacks —, replica loads), then live: a long
//     run's history, no matter how long;
//   - the newest `rewardHistory` messages of RLLOOP_ROLLOUTS, then live, for the reward of each serving adapter
//     (the daemon's answers carry no per-adapter outcome);
//   - the stats subject (core NATS) and the service's status answer, for what the daemon is doing now;
//   - the state record in KV (every revision the bucket keeps, then live), for the committed round, the adapter
//     being served and the last rollback (the events stream may no longer hold its announcement);
//   - the service's round summaries, for rounds whose events the stream no longer holds.
// One ordered consumer per event kind rather than one over several subjects: a list of filter subjects needs
// nats-server 2.10, and the loop supports 2.9. A message that does not parse is skipped: a monitor must never die
// of what it watches. When the wire contract changes, this file is what changes.
import { setTimeout as sleep } from "node:timers/promises";
import { DeliverPolicy, jetstream, jetstreamManager, type Consumer, type ConsumerMessages, type JetStreamManager, type JsMsg } from "@nats-io/jetstream";
import { KvWatchInclude, Kvm } from "@nats-io/kv";
import type { NatsConnection, Subscription } from "@nats-io/nats-core";
import { z } from "zod";
import {
  AdapterPublished, AdapterRolledBack, adapterName, decodeMessage, EVENT_STREAM, Phase, RejectReason, ReplicaEvent, ROLLOUT_STREAM, RolloutRejected,
  RollbackTrigger, RoundEvent, RoundSummary, ROUNDS_QUERY_MAX, STATE_BUCKET, StatsEvent, parseStateRecord, stateKey, subjects,
  type GuardEvidence, type PpoStats, type StateRecord,
} from "../../contract/index.js";
import { removedRollouts } from "../removed-rollouts.js";
import type { RollbackEvidence, RollbackRow, UiLive } from "./model.js";
import { UiStore, type RoundChange } from "./store.js";

export interface UiSourceOptions {
  policy: string;
  /** where the data comes from, for the page's header (the NATS URL; never with credentials) */
  source: string;
  /** newest rollouts read back for the reward plot (default 5,000); 0 = only new ones. Each is read whole, inline
   *  frames included: the default bounds what a monitor pulls over the network when it starts. */
  rewardHistory?: number;
  /** timeout of each request to the daemon's service (default 2000 ms) */
  requestTimeoutMs?: number;
  /** the daemon's round.rows and observe.statsIntervalS when the monitor knows them (its config) */
  roundRows?: number | null;
  statsIntervalS?: number | null;
  /** the store's patch coalescing window (default 100 ms) */
  flushMs?: number;
}

export interface UiSource {
  readonly store: UiStore;
  /** resolves once the stored history of every stream has been read */
  readonly caughtUp: Promise<void>;
  /** stops reading; the store keeps what it has, with `notice` set (the connection stays the caller's) */
  stop(notice?: string): Promise<void>;
}

/** The most summaries the service answers in one request. */
const SUMMARY_LIMIT = ROUNDS_QUERY_MAX;
/** How long to wait between tries while the loop's stream or bucket does not exist yet. */
const RETRY_MS = 2000;
/** How long stop() waits for readers still being set up (an unreachable server's API request can take longer:
 *  such a reader is stopped as soon as its set-up ends). */
const SETUP_WAIT_MS = 5000;

export async function startUiSource(nc: NatsConnection, options: UiSourceOptions): Promise<UiSource> {
  const opts = { rewardHistory: 5000, requestTimeoutMs: 2000, roundRows: null, statsIntervalS: null, flushMs: 100, ...options };
  const names = subjects(opts.policy);
  const store = new UiStore({
    policy: opts.policy, source: opts.source, flushMs: opts.flushMs, meanings: { phases: { ...Phase }, reasons: { ...RejectReason }, triggers: { ...RollbackTrigger } },
  });
  store.live({ connected: !nc.isClosed(), roundRows: opts.roundRows, statsIntervalS: opts.statsIntervalS });
  const readers = new Readers();

  // live stats first, so nothing published while the rest starts is missed
  const stats: Subscription = nc.subscribe(names.stats);
  readers.add(() => stats.unsubscribe());
  void (async () => {
    for await (const msg of stats) {
      const event = StatsEvent.safeParse(decodeMessage(msg.string()));
      // stats flowing means the daemon answers: a notice about its service no longer applies
      if (event.success) store.live({ ...liveFromStats(event.data), notice: null });
    }
  })();
  void followConnection(nc, store, readers.signal);
  void askStatus(nc, names.status, opts.requestTimeoutMs, store, readers.signal);
  void followState(nc, opts.policy, store, readers);

  const stopAll = async (notice?: string) => {
    await readers.stop();
    store.live({ connected: false, notice: notice ?? "the monitor stopped reading" });
    store.flush();
  };
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc).catch(async (err: unknown) => {
    await stopAll(); // the readers started above must not outlive a start that failed
    throw err;
  });
  const follow = (stream: string, subject: string, from: StartAt, apply: (msg: JsMsg) => void) =>
    followStream(jsm, js.consumers, { stream, subject, from, apply, readers });
  const history = [
    follow(EVENT_STREAM, names.rounds, "all", (msg) => applyRound(store, decodeMessage(msg.string()))),
    follow(EVENT_STREAM, names.rejected, "all", (msg) => applyRejection(store, decodeMessage(msg.string()))),
    follow(EVENT_STREAM, names.adapters, "all", (msg) => applyAdapter(store, decodeMessage(msg.string()))),
    follow(EVENT_STREAM, names.replicas, "all", (msg) => applyReplica(store, decodeMessage(msg.string()))),
    follow(ROLLOUT_STREAM, names.rollouts, { newest: opts.rewardHistory }, (msg) => applyRollout(store, decodeMessage(msg.string()))),
  ];
  const caughtUp = Promise.all(history).then(async () => {
    // rounds the events stream no longer holds (older than stream.eventsMaxAgeS), from the daemon's summaries;
    // not once stopped: the page then says the monitor stopped, not that it caught up
    if (readers.signal.aborted) return;
    await askSummaries(nc, names.roundsQuery, opts.requestTimeoutMs, store);
    if (!readers.signal.aborted) store.caughtUp();
  });
  caughtUp.catch(() => {}); // only a stop() ends it early

  return {
    store,
    caughtUp,
    stop: stopAll,
  };
}

// -----------------------------------------------------------------------------------------------------------------
// Wire → view model. Exported for the tests; each takes what a message's JSON parsed to.

const ms = (iso: string) => Date.parse(iso);

export function liveFromStats(s: StatsEvent): Partial<UiLive> {
  return {
    phase: s.phase,
    health: { status: s.health.status, cause: s.health.cause, sinceMs: s.health.since === null ? null : ms(s.health.since) },
    committedRound: s.round, openRound: s.open_round, trainingRound: s.training_round,
    bufferedRows: s.buffered_rows, bufferedRollouts: s.buffered_rollouts, rowsPerS: s.rows_per_s, pendingAcks: s.pending_acks,
    rejectedSinceStart: s.rejected, gpuMemoryBytes: s.gpu_memory_bytes, uptimeS: s.uptime_s, statsAtMs: ms(s.at),
  };
}

function statsChange(stats: PpoStats): RoundChange {
  const { pg_loss, kl, clip_frac, logp_gap, logp_gap_abs, rows, train_s } = stats;
  return { pg_loss, kl, clip_frac, logp_gap, logp_gap_abs, rows, train_s };
}

export function applyRound(store: UiStore, raw: unknown): void {
  const parsed = RoundEvent.safeParse(raw);
  if (!parsed.success || parsed.data.policy !== store.policy) return;
  const e = parsed.data;
  const at = ms(e.at);
  switch (e.type) {
    case "round.closed":
      return store.round(e.round, { status: "closed", trigger: e.trigger, rows: e.rows, rollouts: e.rollouts, closedAtMs: at });
    case "round.assembled":
      return store.round(e.round, { status: "assembled", rows: e.rows });
    case "round.training":
      return store.round(e.round, { status: e.attempt > 1 ? `training #${e.attempt}` : "training", attempts: e.attempt });
    case "round.trained":
      return store.round(e.round, { status: "trained", ...statsChange(e.stats) });
    case "round.attempt_failed":
      return store.round(e.round, { status: `attempt ${e.attempt} failed`, note: `${e.fault}: ${e.error}` });
    case "round.isolated":
      return store.round(e.round, { status: "isolated", rows: e.rows, note: removedRollouts(e) });
    case "round.rejected":
      store.round(e.round, { status: "rejected", note: e.reason, ...(e.stats ? statsChange(e.stats) : {}) });
      return store.adapter({ round: e.round, name: null, sha256: null, verdict: "refused", reason: e.reason, atMs: at });
    case "round.committed":
      // a published round is "committed" until its announcement is out (publishing may retry for a while)
      return store.round(e.round, { status: e.outcome === "published" ? "committed" : e.outcome, outcome: e.outcome, finishedAtMs: at });
    case "round.published":
      return store.round(e.round, { status: "published", outcome: "published", finishedAtMs: at });
  }
}

export function applyRejection(store: UiStore, raw: unknown): void {
  const parsed = RolloutRejected.safeParse(raw);
  if (!parsed.success || parsed.data.policy !== store.policy) return;
  const e = parsed.data;
  store.rejection({ atMs: ms(e.at), reason: e.reason, message: e.message, id: e.id, seq: e.seq });
}

/** An adapter announcement (rlloop.<policy>.adapter.>): a published adapter, or a rollback to an earlier one. */
export function applyAdapter(store: UiStore, raw: unknown): void {
  if ((raw as { type?: unknown } | null)?.type === "adapter.rolled_back") return applyRollback(store, raw);
  const parsed = AdapterPublished.safeParse(raw);
  if (!parsed.success || parsed.data.policy !== store.policy) return;
  const e = parsed.data;
  store.adapter({ round: e.round, name: e.name, sha256: e.sha256, verdict: "passed", reason: null, atMs: ms(e.at) });
}

export function applyRollback(store: UiStore, raw: unknown): void {
  const parsed = AdapterRolledBack.safeParse(raw);
  if (!parsed.success || parsed.data.policy !== store.policy) return;
  const e = parsed.data;
  store.rollback({
    seq: e.seq, trigger: e.trigger, fromRound: e.from.round, regressedRound: e.regressed, toRound: e.round, toName: e.name,
    toSha256: e.sha256, committedRound: e.committed_round, reason: e.reason, evidence: evidenceOf(e.evidence), atMs: ms(e.at),
  });
}

/** The last rollback a state record names, as far as the record tells it: the target's sha256 when the record still
 *  names the target's weights (it is the adapter served, or one of the lineage). */
export function rollbackFromState(record: StateRecord): RollbackRow | null {
  const rb = record.rollback;
  if (!rb) return null;
  const target = record.adapter.round === rb.to ? record.adapter : record.lineage.find((e) => e.round === rb.to);
  return {
    seq: rb.seq, trigger: rb.trigger, fromRound: rb.from, regressedRound: rb.regressed, toRound: rb.to, toName: adapterName(record.policy, rb.to),
    toSha256: target?.sha256 ?? null, committedRound: rb.round, reason: rb.reason, evidence: evidenceOf(rb.evidence), atMs: ms(rb.at),
  };
}

function evidenceOf(e: GuardEvidence | null): RollbackEvidence | null {
  if (e === null) return null;
  return {
    test: e.test, alpha: e.alpha, minEffect: e.min_effect, candidate: { ...e.candidate }, baseline: { ...e.baseline }, pairs: e.pairs,
    differenceUpper: e.difference_upper,
  };
}

export function applyReplica(store: UiStore, raw: unknown): void {
  const parsed = ReplicaEvent.safeParse(raw);
  if (!parsed.success || parsed.data.policy !== store.policy) return;
  const e = parsed.data;
  store.replicaLoad(e.replica, {
    name: e.name, status: e.type === "replica.loaded" ? "loaded" : "load_failed", reason: e.type === "replica.load_failed" ? e.reason : null, atMs: ms(e.at),
  });
}

/** The two fields of a rollout the reward plot needs. Read as published: a rollout the daemon then rejects (a bad
 *  frame, say) still tells what the robot got from that adapter. */
const RolloutReward = z.object({ policy: z.string(), reward: z.number(), adapter: z.object({ round: z.number().int().min(0) }) });

export function applyRollout(store: UiStore, raw: unknown): void {
  const parsed = RolloutReward.safeParse(raw);
  if (parsed.success && parsed.data.policy === store.policy) store.reward(parsed.data.adapter.round, parsed.data.reward);
}

function applySummaries(store: UiStore, raw: unknown): void {
  const parsed = z.array(RoundSummary).safeParse(raw);
  if (!parsed.success) return;
  for (const s of parsed.data) {
    // the service says committed:<outcome> for a finished round
    const [step, outcome] = s.status.split(":");
    store.roundIfMissing(s.round, {
      status: step === "committed" && outcome ? outcome : s.status, outcome: step === "committed" ? (outcome ?? null) : null,
      rows: s.rows, rollouts: s.rollouts, ...(s.stats ? statsChange(s.stats) : {}),
    });
  }
}

// -----------------------------------------------------------------------------------------------------------------
// NATS plumbing

type StartAt = "all" | { newest: number };

interface FollowOptions {
  stream: string;
  subject: string;
  from: StartAt;
  apply: (msg: JsMsg) => void;
  readers: Readers;
}

/**
 * Reads `subject` of `stream` with an ordered consumer (ephemeral, server-side filtered, recreated by the client
 * after a reconnect) from the chosen start, then follows it. Resolves once the messages stored when it started
 * have been applied; waits (retrying) while the stream does not exist yet.
 */
async function followStream(jsm: JetStreamManager, consumers: { get(stream: string, opts: object): Promise<Consumer> }, o: FollowOptions): Promise<void> {
  const { signal } = o.readers;
  const { stored, consumer, messages } = await o.readers.setUp(async () => {
    const info = await retry(() => jsm.streams.info(o.stream, { subjects_filter: o.subject }), signal);
    const start = o.from === "all" ? 1 : Math.max(1, info.state.last_seq - o.from.newest + 1);
    const consumer = await retry(() => consumers.get(o.stream, { filter_subjects: o.subject, deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: start }), signal);
    const messages: ConsumerMessages = await consumer.consume();
    return { stored: Object.values(info.state.subjects ?? {}).reduce((sum, n) => sum + n, 0), consumer, messages };
  }, ({ messages }) => () => messages.stop());
  let done = stored === 0 || (o.from !== "all" && o.from.newest === 0);
  let markDone: () => void = () => {};
  const finished = new Promise<void>((resolve) => (markDone = resolve));
  // what the consumer had delivered when asked: reaching it means the stored messages are all applied
  let target: number | null = null;
  let lastSeq = 0;
  const check = () => {
    if (!done && target !== null && lastSeq >= target) done = true;
    if (done) markDone();
  };
  void (async () => {
    for await (const msg of messages) {
      o.apply(msg);
      lastSeq = msg.seq;
      if (msg.info.pending === 0) done = true;
      check();
    }
  })().catch(() => {});
  check();
  if (!done) {
    // a filter that matched nothing from `start` on delivers nothing: the consumer's own count says so
    const ci = await consumer.info().catch(() => null);
    // no answer: take the stored history as read rather than show "reading" forever (it is only a label)
    if (ci === null) done = true;
    else if (ci.num_pending === 0) target = ci.delivered.stream_seq;
    check();
  }
  return finished;
}

/**
 * The monitor's readers and how they stop. A reader's set-up (its stream's consumer, the state bucket's watch) can
 * still be in flight when stop() is called, the monitor stopped right after it started: stop() waits for such
 * set-ups (SETUP_WAIT_MS at most) and stops what they made, so that once it returns nothing the monitor started is
 * subscribed on the server (a consumer left running keeps the connection from draining). A set-up that ends later
 * still is stopped as it ends.
 */
class Readers {
  readonly #aborter = new AbortController();
  readonly #stoppers: Array<() => unknown> = [];
  readonly #settingUp = new Set<Promise<unknown>>();

  get signal(): AbortSignal {
    return this.#aborter.signal;
  }

  /** Registers what stops a reader; after stop() began, it is stopped at once. */
  add(stop: () => unknown): void {
    if (this.signal.aborted) void Promise.resolve(stop()).catch(() => {});
    else this.#stoppers.push(stop);
  }

  /** Runs a reader's set-up and registers what stops what it made; stop() waits for it. */
  setUp<T>(create: () => Promise<T>, stopperOf: (made: T) => () => unknown): Promise<T> {
    const step = create().then((made) => {
      this.add(stopperOf(made));
      return made;
    });
    this.#settingUp.add(step);
    void step.catch(() => {}).finally(() => this.#settingUp.delete(step));
    return step;
  }

  async stop(): Promise<void> {
    this.#aborter.abort();
    await Promise.race([Promise.allSettled([...this.#settingUp]), sleep(SETUP_WAIT_MS, undefined, { ref: false })]);
    for (const stop of this.#stoppers.splice(0)) await Promise.resolve(stop()).catch(() => {});
  }
}

async function retry<T>(attempt: () => Promise<T>, signal: AbortSignal): Promise<T> {
  for (;;) {
    signal.throwIfAborted(); // stopped meanwhile: nothing more is created on the server
    try {
      return await attempt();
    } catch (err) {
      if (signal.aborted) throw err;
      await sleep(RETRY_MS, undefined, { ref: false, signal }).catch(() => {}); // a stop() ends the wait
      if (signal.aborted) throw err;
    }
  }
}

async function followConnection(nc: NatsConnection, store: UiStore, signal: AbortSignal): Promise<void> {
  for await (const s of nc.status()) {
    if (signal.aborted) return;
    if (s.type === "disconnect") store.live({ connected: false, notice: "NATS connection lost; reconnecting" });
    if (s.type === "reconnect") store.live({ connected: true, notice: null });
  }
}

/** Asks the daemon's service for its snapshot until it answers or stats arrive (a daemon still starting has its
 *  service up only once it has recovered its state, and stats may be many seconds apart). */
async function askStatus(nc: NatsConnection, subject: string, timeoutMs: number, store: UiStore, signal: AbortSignal): Promise<void> {
  while (!signal.aborted && store.liveNow().statsAtMs === null) {
    try {
      const event = StatsEvent.safeParse(decodeMessage((await nc.request(subject, "", { timeout: timeoutMs })).string()));
      // live stats may have come first; they are newer than an answer to a request sent before them
      if (event.success && store.liveNow().statsAtMs === null) store.live({ ...liveFromStats(event.data), notice: null });
      return;
    } catch (err) {
      if (store.liveNow().statsAtMs === null) store.live({ notice: `no answer from ${subject} (is the daemon running?): ${(err as Error).message}` });
    }
    await sleep(RETRY_MS, undefined, { ref: false });
  }
}

async function askSummaries(nc: NatsConnection, subject: string, timeoutMs: number, store: UiStore): Promise<void> {
  try {
    applySummaries(store, decodeMessage((await nc.request(subject, JSON.stringify({ limit: SUMMARY_LIMIT }), { timeout: timeoutMs })).string()));
  } catch {
    // no daemon answering: the events stream is all there is, which is the usual case anyway
  }
}

/** The committed state record: the current round, the adapter rollouts should be served by, the last rollback. */
async function followState(nc: NatsConnection, policy: string, store: UiStore, readers: Readers): Promise<void> {
  try {
    const watch = await readers.setUp(async () => {
      const kv = await retry(() => new Kvm(nc).open(STATE_BUCKET).then(async (b) => (await b.status(), b)), readers.signal);
      // every revision the bucket keeps, oldest first: each names the rollback last done when it was committed, so
      // two rollbacks a few rounds apart are both told even when the events stream no longer holds them
      return kv.watch({ key: stateKey(policy), include: KvWatchInclude.AllHistory });
    }, (w) => () => w.stop());
    for await (const entry of watch) {
      if (entry.operation !== "PUT") continue;
      try {
        applyState(store, parseStateRecord(entry.json()));
      } catch {
        // a record this monitor cannot read: the stats event still says the round
      }
    }
  } catch {
    // stopped while waiting for the bucket
  }
}

/** One revision of the state record (revisions come in order, so the newest is applied last). */
export function applyState(store: UiStore, record: StateRecord): void {
  if (record.policy !== store.policy) return;
  // the committed round goes with open and training round, which only stats carry: from here only until
  // stats arrive, so the three never disagree
  const committed = store.liveNow().statsAtMs === null ? { committedRound: record.round } : {};
  const a = record.adapter;
  store.live({ ...committed, servingAdapter: { round: a.round, name: adapterName(store.policy, a.round), sha256: a.sha256 } });
  const rollback = rollbackFromState(record);
  if (rollback) store.rollbackIfMissing(rollback);
}
