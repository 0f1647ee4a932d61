// What `rlloop watch` knows about a running loop, and how each message changes it. Pure reducers: every function
// returns a new state and never reads a clock (receipt times are passed in), so the view is testable from tables.
import type { PpoStats, ReplicaEvent, RoundEvent, RoundSummary, StatsEvent } from "../../contract/index.js";
import { removedRollouts } from "../removed-rollouts.js";

export interface RoundRow {
  round: number;
  /** lifecycle step or outcome: closed, assembled, training, failed #n, isolated, trained, rejected, empty, published */
  status: string;
  rows: number | null;
  pg_loss: number | null;
  kl: number | null;
  clip_frac: number | null;
  logp_gap: number | null;
  /** training throughput: stats.rows / stats.train_s */
  rowsPerS: number | null;
  /** why a round was rejected, or why its last attempt failed */
  reason: string | null;
}

export interface ReplicaRow {
  replica: string;
  name: string;
  loaded: boolean;
  reason: string | null;
  at: string;
}

export interface WatchState {
  policy: string;
  /** where the data comes from (NATS URL), for the header */
  source: string;
  stats: StatsEvent | null;
  /** local receipt time of the last stats message (ms since epoch) */
  statsReceivedMs: number | null;
  /** newest first, at most `maxRounds` */
  rounds: RoundRow[];
  replicas: ReplicaRow[];
  /** a one-line problem to show (service not answering, connection lost) */
  notice: string | null;
  maxRounds: number;
}

export function initialState(policy: string, source: string, maxRounds = 12): WatchState {
  return { policy, source, stats: null, statsReceivedMs: null, rounds: [], replicas: [], notice: null, maxRounds };
}

export function withStats(state: WatchState, stats: StatsEvent, receivedMs: number): WatchState {
  return { ...state, stats, statsReceivedMs: receivedMs };
}

export function withNotice(state: WatchState, notice: string | null): WatchState {
  return { ...state, notice };
}

/** Rows from the service's `rounds` endpoint (history at start-up); live events refine them afterwards. */
export function withRoundSummaries(state: WatchState, summaries: RoundSummary[]): WatchState {
  let next = state;
  for (const s of summaries) {
    next = upsertRound(next, s.round, (row) => ({ ...row, status: summaryStatus(s.status), rows: s.rows, ...fromStats(s.stats) }));
  }
  return next;
}

/** Adds rows for rounds the state does not know yet (history under live data); known rounds are left as they are. */
export function withMissingRounds(state: WatchState, rows: RoundRow[]): WatchState {
  const missing = rows.filter((row) => !state.rounds.some((r) => r.round === row.round));
  return { ...state, rounds: [...state.rounds, ...missing].sort((a, b) => b.round - a.round).slice(0, state.maxRounds) };
}

export function withRoundEvent(state: WatchState, event: RoundEvent): WatchState {
  return upsertRound(state, event.round, (row) => {
    switch (event.type) {
      case "round.closed":
        return { ...row, status: "closed", rows: event.rows };
      case "round.assembled":
        return { ...row, status: "assembled", rows: event.rows };
      case "round.training":
        return { ...row, status: event.attempt > 1 ? `training #${event.attempt}` : "training" };
      case "round.trained":
        return { ...row, status: "trained", ...fromStats(event.stats) };
      case "round.rejected":
        return { ...row, status: "rejected", reason: event.reason, ...(event.stats ? fromStats(event.stats) : {}) };
      case "round.attempt_failed":
        return { ...row, status: `failed #${event.attempt}`, reason: `${event.fault}: ${event.error}` };
      case "round.isolated":
        return { ...row, status: "isolated", rows: event.rows, reason: removedRollouts(event) };
      case "round.committed":
        // the outcome is what an operator cares about; "committed" alone would hide a rejection
        return { ...row, status: event.outcome };
      case "round.published":
        return { ...row, status: "published" };
    }
  });
}

export function withReplica(state: WatchState, event: ReplicaEvent): WatchState {
  const row: ReplicaRow = {
    replica: event.replica,
    name: event.name,
    loaded: event.type === "replica.loaded",
    reason: event.type === "replica.load_failed" ? event.reason : null,
    at: event.at,
  };
  const others = state.replicas.filter((r) => r.replica !== event.replica);
  return { ...state, replicas: [...others, row].sort((a, b) => a.replica.localeCompare(b.replica)) };
}

/** The service says `committed:<outcome>` for a finished round; the outcome is the part worth a column. */
function summaryStatus(status: string): string {
  const [step, outcome] = status.split(":");
  return step === "committed" && outcome ? outcome : status;
}

function upsertRound(state: WatchState, round: number, change: (row: RoundRow) => RoundRow): WatchState {
  const existing = state.rounds.find((r) => r.round === round) ?? emptyRow(round);
  const rows = [...state.rounds.filter((r) => r.round !== round), change(existing)]
    .sort((a, b) => b.round - a.round)
    .slice(0, state.maxRounds);
  return { ...state, rounds: rows };
}

function emptyRow(round: number): RoundRow {
  return { round, status: "", rows: null, pg_loss: null, kl: null, clip_frac: null, logp_gap: null, rowsPerS: null, reason: null };
}

function fromStats(stats: PpoStats | null): Pick<RoundRow, "pg_loss" | "kl" | "clip_frac" | "logp_gap" | "rowsPerS"> {
  if (!stats) return { pg_loss: null, kl: null, clip_frac: null, logp_gap: null, rowsPerS: null };
  return {
    pg_loss: stats.pg_loss,
    kl: stats.kl,
    clip_frac: stats.clip_frac,
    logp_gap: stats.logp_gap,
    rowsPerS: stats.train_s > 0 ? stats.rows / stats.train_s : null,
  };
}
