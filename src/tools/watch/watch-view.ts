// Renders a WatchState as the text of one terminal frame. A pure function of (state, clock, width): no I/O and no
// ANSI codes, so tests compare strings and `--once` output is script-friendly. The terminal loop (clear + redraw)
// lives in the watch command.
import { Phase } from "../../contract/index.js";
import type { ReplicaRow, RoundRow, WatchState } from "./watch-state.js";

export interface ViewOptions {
  nowMs: number;
  /** terminal columns; lines are cut to fit */
  width: number;
  /** the daemon's observe.statsIntervalS: stats older than 3 intervals are marked stale */
  statsIntervalS: number;
}

export function renderWatch(state: WatchState, view: ViewOptions): string {
  const lines = [
    `rlloop watch · policy ${state.policy} · ${state.source} · ${clock(new Date(view.nowMs).toISOString())} UTC`,
    ...(state.notice ? [`! ${state.notice}`] : []),
    ...statusLines(state, view),
    "",
    ...roundTable(state.rounds),
    ...replicaLines(state.replicas),
  ];
  return lines.map((line) => cut(line, view.width)).join("\n") + "\n";
}

function statusLines(state: WatchState, view: ViewOptions): string[] {
  const s = state.stats;
  if (!s || state.statsReceivedMs === null) return [`waiting for stats on rlloop.${state.policy}.stats ...`];
  const ageS = Math.max(0, Math.round((view.nowMs - state.statsReceivedMs) / 1000));
  const stale = ageS > 3 * view.statsIntervalS ? " (stale: is the daemon running?)" : "";
  const rounds = [`${s.round} committed`, `${s.open_round} open`, ...(s.training_round !== null ? [`${s.training_round} training`] : [])];
  const last = s.last
    ? `r${s.last.round} ${s.last.outcome} · pg_loss ${num(s.last.pg_loss)} · kl ${num(s.last.kl)} · clip_frac ${num(s.last.clip_frac)} · logp_gap ${num(s.last.logp_gap)}`
    : "no round yet";
  return [
    `phase     ${s.phase} — ${Phase[s.phase]}`,
    ...(s.health.status === "degraded" ? [`health    DEGRADED since ${clock(s.health.since ?? "")} — ${s.health.cause ?? "?"}`] : []),
    `round     ${rounds.join(" · ")}`,
    `buffered  ${s.buffered_rows} rows in ${s.buffered_rollouts} rollouts · intake ${s.rows_per_s.toFixed(1)} rows/s · pending acks ${s.pending_acks} · rejected ${s.rejected}`,
    `last      ${last}`,
    `gpu       ${s.gpu_memory_bytes === null ? "–" : `${(s.gpu_memory_bytes / 2 ** 30).toFixed(1)} GiB`} · uptime ${duration(s.uptime_s)} · stats ${ageS} s ago${stale}`,
    ...outcomeLines(s),
  ];
}

/** Live outcomes of the newest adapters and the guard's verdict (issue 23), when the daemon reports them. */
function outcomeLines(s: NonNullable<WatchState["stats"]>): string[] {
  const shown = (s.outcomes ?? []).slice(-4).reverse();
  const lines = shown.length === 0 ? [] : [`robots    ${shown.map((o) => `r${o.round} ${o.count} × ${o.mean === null ? "–" : o.mean.toFixed(3)}${o.sd === null ? "" : ` ± ${o.sd.toFixed(3)}`}${o.success_rate === null ? "" : ` (${(100 * o.success_rate).toFixed(0)}% ok)`}`).join(" · ")}`];
  const g = s.guard;
  if (!g || g.status === "off") return lines;
  const verdict = g.status === "regressed" ? `REGRESSED r${g.candidate} worse than r${g.target}` : g.status === "ok" ? `ok r${g.candidate}${g.margin === null ? "" : `, margin ${g.margin.toFixed(3)}`}` : `waiting — ${g.reason ?? ""}`;
  const last = g.last_rollback ? ` · last rollback #${g.last_rollback.seq} r${g.last_rollback.from} → r${g.last_rollback.to} (${g.last_rollback.trigger}, round ${g.last_rollback.round})` : "";
  return [...lines, `guard     ${g.enabled ? "" : "(report only) "}${verdict}${last}`];
}

const COLUMNS = [
  { title: "round", width: 6 },
  { title: "status", width: 12, left: true },
  { title: "rows", width: 6 },
  { title: "pg_loss", width: 10 },
  { title: "kl", width: 10 },
  { title: "clip_frac", width: 10 },
  { title: "logp_gap", width: 10 },
  { title: "rows/s", width: 8 },
] as const;

function roundTable(rounds: RoundRow[]): string[] {
  if (rounds.length === 0) return ["no rounds yet"];
  const row = (cells: string[]) =>
    cells.map((cell, i) => {
      const col = COLUMNS[i];
      if (!col) return cell;
      return "left" in col ? cell.padEnd(col.width) : cell.padStart(col.width);
    }).join(" ").trimEnd();
  return [
    row(COLUMNS.map((c) => c.title)),
    ...rounds.map((r) => {
      const cells = [String(r.round), r.status || "?", r.rows === null ? "–" : String(r.rows), num(r.pg_loss), num(r.kl), num(r.clip_frac), num(r.logp_gap), r.rowsPerS === null ? "–" : r.rowsPerS.toFixed(1)];
      return row(cells) + (r.reason ? `   ${r.reason}` : "");
    }),
  ];
}

function replicaLines(replicas: ReplicaRow[]): string[] {
  if (replicas.length === 0) return [];
  const width = Math.max(...replicas.map((r) => r.replica.length));
  return [
    "",
    "replicas",
    ...replicas.map((r) => `  ${r.replica.padEnd(width)}  ${r.name}  ${r.loaded ? "loaded     " : "load_failed"}  ${clock(r.at)}${r.reason ? `  ${r.reason}` : ""}`),
  ];
}

/** Fixed 4 decimals in the usual range, exponent outside it; non-finite values spelled out (the gate acts on them). */
export function num(value: number | null): string {
  if (value === null) return "–";
  if (Number.isNaN(value)) return "NaN";
  if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
  const abs = Math.abs(value);
  if (abs !== 0 && (abs >= 1e4 || abs < 1e-3)) return value.toExponential(2);
  return value.toFixed(4);
}

export function duration(seconds: number): string {
  const s = Math.floor(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
  return `${Math.floor(s / 86400)}d${String(Math.floor((s % 86400) / 3600)).padStart(2, "0")}h`;
}

/** HH:MM:SS of an ISO timestamp (UTC). */
function clock(iso: string): string {
  return iso.length >= 19 ? iso.slice(11, 19) : iso;
}

function cut(line: string, width: number): string {
  return line.length > width ? `${line.slice(0, Math.max(0, width - 1))}…` : line;
}
