// The view model of one loop, held by the UI server: the source (source.ts) tells it what happened, in the view
// model's terms; pages get the whole snapshot once and then patches. Changes are coalesced for `flushMs` (a burst
// of rollouts is one patch, not hundreds) and flushed in order, so a page is at most `flushMs` behind the source.
// Knows nothing of NATS or the wire.
import {
  KEPT_REJECTIONS, KEPT_ROUNDS, type AdapterRow, type ReasonRow, type RejectionPoint, type ReplicaLoad, type ReplicaRow, type RewardPoint,
  type RollbackRow, type RoundPoint, type UiLive, type UiMeanings, type UiPatch, type UiSnapshot,
} from "./model.js";
import { RewardTally } from "./reward.js";

export interface UiStoreOptions {
  policy: string;
  source: string;
  meanings: UiMeanings;
  /** coalescing window of patches (default 100 ms) */
  flushMs?: number;
  /** rejections kept for the over-time plot (the counts per reason stay exact beyond it; default 20,000) */
  maxRejections?: number;
  /** adapters remembered per replica (default 20) */
  maxLoadsPerReplica?: number;
  /** rounds kept, the newest, with the adapters and rewards of those rounds on (default 10,000: days of rounds; a
   *  page's snapshot is built from them, and a daemon runs for weeks) */
  maxRounds?: number;
}

/** What a round event changes; `latency_s` is derived here from the close and finish times. */
export type RoundChange = Partial<Omit<RoundPoint, "round" | "latency_s">>;

type Listener = (patch: UiPatch) => void;

export function emptyLive(): UiLive {
  return {
    phase: null, health: { status: "unknown", cause: null, sinceMs: null }, committedRound: null, openRound: null, trainingRound: null,
    bufferedRows: null, bufferedRollouts: null, roundRows: null, rowsPerS: null, pendingAcks: null, rejectedSinceStart: null,
    gpuMemoryBytes: null, uptimeS: null, statsAtMs: null, statsIntervalS: null, servingAdapter: null, connected: false, notice: null,
  };
}

function emptyRound(round: number): RoundPoint {
  return {
    round, status: "", outcome: null, trigger: null, rows: null, rollouts: null, attempts: null, pg_loss: null, kl: null,
    clip_frac: null, logp_gap: null, logp_gap_abs: null, train_s: null, latency_s: null, closedAtMs: null, finishedAtMs: null, note: null,
  };
}

export class UiStore {
  readonly policy: string;
  readonly source: string;
  readonly #meanings: UiMeanings;
  readonly #flushMs: number;
  readonly #maxRejections: number;
  readonly #maxLoads: number;
  readonly #maxRounds: number;

  #revision = 0;
  #caughtUp = false;
  #live: UiLive = emptyLive();
  readonly #rounds = new Map<number, RoundPoint>();
  readonly #rewards = new Map<number, RewardTally>();
  readonly #reasons = new Map<string, ReasonRow>();
  #rejections: RejectionPoint[] = [];
  readonly #rejectionSeqs = new Set<number>();
  readonly #adapters = new Map<number, AdapterRow>();
  readonly #replicas = new Map<string, ReplicaRow>();
  readonly #rollbacks = new Map<number, RollbackRow>();
  /** the seqs known from their announcement, not only from the state record */
  readonly #announced = new Set<number>();

  readonly #listeners = new Set<Listener>();
  #timer: NodeJS.Timeout | null = null;
  readonly #dirty = {
    caughtUp: false, live: false, rounds: new Set<number>(), rewards: new Set<number>(), reasons: new Set<string>(),
    rejections: [] as RejectionPoint[], adapters: new Set<number>(), replicas: new Set<string>(), rollbacks: new Set<number>(),
  };

  constructor(options: UiStoreOptions) {
    this.policy = options.policy;
    this.source = options.source;
    this.#meanings = options.meanings;
    this.#flushMs = options.flushMs ?? 100;
    this.#maxRejections = options.maxRejections ?? KEPT_REJECTIONS;
    this.#maxLoads = options.maxLoadsPerReplica ?? 20;
    this.#maxRounds = options.maxRounds ?? KEPT_ROUNDS;
  }

  // -------------------------------------------------------------------------------------------------------------
  // What the source reports

  live(change: Partial<UiLive>): void {
    this.#live = { ...this.#live, ...change };
    this.#dirty.live = true;
    this.#schedule();
  }

  liveNow(): UiLive {
    return this.#live;
  }

  /** Folds one step of a round's life into its row. */
  round(round: number, change: RoundChange): void {
    const before = this.#rounds.get(round) ?? emptyRound(round);
    const next: RoundPoint = { ...before };
    for (const [key, value] of Object.entries(change) as Array<[keyof RoundChange, unknown]>) {
      if (value !== undefined) (next as unknown as Record<string, unknown>)[key] = value;
    }
    next.latency_s = next.closedAtMs !== null && next.finishedAtMs !== null ? (next.finishedAtMs - next.closedAtMs) / 1000 : null;
    this.#rounds.set(round, next);
    this.#dirty.rounds.add(round);
    if (this.#rounds.size > this.#maxRounds * 1.25) this.#forgetOldRounds();
    this.#schedule();
  }

  /** Down to the newest maxRounds rounds, and the adapters and rewards of rounds before them. */
  #forgetOldRounds(): void {
    const rounds = [...this.#rounds.keys()].sort((a, b) => a - b);
    const oldest = rounds[rounds.length - this.#maxRounds] as number;
    const d = this.#dirty;
    for (const [map, dirty] of [[this.#rounds, d.rounds], [this.#adapters, d.adapters], [this.#rewards, d.rewards]] as const) {
      for (const round of map.keys()) {
        if (round >= oldest) continue;
        map.delete(round);
        dirty.delete(round);
      }
    }
  }

  /** A round known from elsewhere (the daemon's summaries); rounds already known from their events are kept. */
  roundIfMissing(round: number, change: RoundChange): void {
    if (!this.#rounds.has(round)) this.round(round, change);
  }

  hasRound(round: number): boolean {
    return this.#rounds.has(round);
  }

  reward(adapterRound: number, reward: number): void {
    let tally = this.#rewards.get(adapterRound);
    if (!tally) this.#rewards.set(adapterRound, (tally = new RewardTally()));
    tally.add(reward);
    this.#dirty.rewards.add(adapterRound);
    this.#schedule();
  }

  /** One rejected rollout; a rejection already counted (same stream sequence) is ignored. */
  rejection(rejection: RejectionPoint): void {
    if (this.#rejectionSeqs.has(rejection.seq)) return;
    this.#rejectionSeqs.add(rejection.seq);
    const row = this.#reasons.get(rejection.reason) ?? { reason: rejection.reason, count: 0, lastAtMs: 0, lastMessage: "" };
    const newest = rejection.atMs >= row.lastAtMs;
    this.#reasons.set(rejection.reason, {
      reason: row.reason, count: row.count + 1,
      lastAtMs: newest ? rejection.atMs : row.lastAtMs, lastMessage: newest ? rejection.message : row.lastMessage,
    });
    this.#rejections.push(rejection);
    if (this.#rejections.length > this.#maxRejections * 1.25) {
      // the sequences of those no longer plotted are forgotten too: a repeat of one that old would count it again
      const dropped = this.#rejections.length - this.#maxRejections;
      for (const r of this.#rejections.slice(0, dropped)) this.#rejectionSeqs.delete(r.seq);
      this.#rejections = this.#rejections.slice(dropped);
    }
    this.#dirty.reasons.add(rejection.reason);
    this.#dirty.rejections.push(rejection);
    this.#schedule();
  }

  adapter(row: AdapterRow): void {
    this.#adapters.set(row.round, row);
    this.#dirty.adapters.add(row.round);
    this.#schedule();
  }

  /** What a replica did with an adapter; an older event than the one kept for that adapter is ignored. */
  replicaLoad(replica: string, load: ReplicaLoad): void {
    const row = this.#replicas.get(replica) ?? { replica, loads: [] };
    const previous = row.loads.find((l) => l.name === load.name);
    if (previous && previous.atMs > load.atMs) return;
    const loads = [load, ...row.loads.filter((l) => l.name !== load.name)].sort((a, b) => b.atMs - a.atMs).slice(0, this.#maxLoads);
    this.#replicas.set(replica, { replica, loads });
    this.#dirty.replicas.add(replica);
    this.#schedule();
  }

  /**
   * A rollback's announcement. The daemon announces each seq once (it reads the subject before publishing), so a
   * second message with a seq already announced is a re-publish, or not the daemon's: the first one stands. It
   * replaces what the state record told of the same rollback (the announcement names the target's weights too).
   */
  rollback(row: RollbackRow): void {
    if (this.#announced.has(row.seq)) return;
    this.#announced.add(row.seq);
    this.#setRollback(row);
  }

  /** A rollback the state record tells of: kept only while no announcement of it has been read (the events stream
   *  may no longer hold it, or the announcement is still to come). */
  rollbackIfMissing(row: RollbackRow): void {
    if (!this.#rollbacks.has(row.seq)) this.#setRollback(row);
  }

  #setRollback(row: RollbackRow): void {
    this.#rollbacks.set(row.seq, row);
    this.#dirty.rollbacks.add(row.seq);
    this.#schedule();
  }

  /** The stored history has been read: from now on everything is live. */
  caughtUp(): void {
    if (this.#caughtUp) return;
    this.#caughtUp = true;
    this.#dirty.caughtUp = true;
    this.#schedule();
  }

  isCaughtUp(): boolean {
    return this.#caughtUp;
  }

  // -------------------------------------------------------------------------------------------------------------
  // What pages get

  /** The whole view. Pending changes are flushed to the current listeners first, so a listener added right after
   *  this call receives exactly the changes after this snapshot. */
  snapshot(): UiSnapshot {
    this.flush();
    return {
      format: 1, revision: this.#revision, policy: this.policy, source: this.source, caughtUp: this.#caughtUp, live: this.#live,
      meanings: this.#meanings,
      rounds: [...this.#rounds.values()].sort((a, b) => a.round - b.round),
      rewards: [...this.#rewards.entries()].map(([round, tally]) => tally.point(round)).sort((a, b) => a.adapterRound - b.adapterRound),
      reasons: [...this.#reasons.values()].sort((a, b) => b.count - a.count || a.reason.localeCompare(b.reason)),
      rejections: this.#rejections.slice(-this.#maxRejections),
      adapters: [...this.#adapters.values()].sort((a, b) => a.round - b.round),
      replicas: [...this.#replicas.values()].sort((a, b) => a.replica.localeCompare(b.replica)),
      rollbacks: [...this.#rollbacks.values()].sort((a, b) => a.seq - b.seq),
    };
  }

  /** Calls `listener` with every patch from now on; returns the unsubscribe function. */
  subscribe(listener: Listener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Sends what changed since the last flush (done by the timer; callable to flush now). */
  flush(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    const d = this.#dirty;
    const changed = d.caughtUp || d.live || d.rounds.size + d.rewards.size + d.reasons.size + d.rejections.length + d.adapters.size + d.replicas.size + d.rollbacks.size > 0;
    if (!changed) return;
    this.#revision++;
    const patch: UiPatch = { revision: this.#revision };
    if (d.caughtUp) patch.caughtUp = this.#caughtUp;
    if (d.live) patch.live = this.#live;
    if (d.rounds.size) patch.rounds = pick(d.rounds, this.#rounds);
    if (d.rewards.size) patch.rewards = [...d.rewards].map((r) => (this.#rewards.get(r) as RewardTally).point(r));
    if (d.reasons.size) patch.reasons = pick(d.reasons, this.#reasons);
    if (d.rejections.length) patch.rejections = d.rejections;
    if (d.adapters.size) patch.adapters = pick(d.adapters, this.#adapters);
    if (d.replicas.size) patch.replicas = pick(d.replicas, this.#replicas);
    if (d.rollbacks.size) patch.rollbacks = pick(d.rollbacks, this.#rollbacks);
    d.caughtUp = false;
    d.live = false;
    d.rounds = new Set();
    d.rewards = new Set();
    d.reasons = new Set();
    d.rejections = [];
    d.adapters = new Set();
    d.replicas = new Set();
    d.rollbacks = new Set();
    for (const listener of this.#listeners) listener(patch);
  }

  /** Stops the flush timer (pending changes are flushed). */
  close(): void {
    this.flush();
    this.#listeners.clear();
  }

  #schedule(): void {
    this.#timer ??= setTimeout(() => this.flush(), this.#flushMs);
  }
}

function pick<K, V>(keys: Set<K>, from: Map<K, V>): V[] {
  return [...keys].map((k) => from.get(k)).filter((v): v is V => v !== undefined);
}
