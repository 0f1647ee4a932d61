// The page's text: the header (phase, health, freshness), the degraded banner, the cards (rounds, buffer, acks,
// intake, serving adapter) and the tables (rollbacks, rejections by reason, adapters with the gate's verdict, what
// the rollbacks did to each and each replica's load, replicas). Rebuilt from the view model on every change; long
// tables show their newest rows.
import type { AdapterRow, ReplicaLoad, UiSnapshot } from "../model.js";
import { byId, fill, h } from "./dom.js";
import { bytes, duration, int, num, shortSha, time } from "./format.js";
import { renderRollbacks, rollbackNotes, servingDetail, type RollbackNote } from "./rollbacks.js";

/** Adapters shown in the table; the plots carry the whole history. */
export const ADAPTER_ROWS = 100;

/** A snapshot older than this many stats intervals means the daemon stopped publishing. */
const STALE_INTERVALS = 3;

export function renderHeader(view: UiSnapshot, nowMs: number, streamOk: boolean): void {
  const live = view.live;
  fill("policy", view.policy);
  fill("source", view.source);
  const phase = byId("phase");
  phase.textContent = live.phase ?? "unknown";
  phase.title = live.phase ? (view.meanings.phases[live.phase] ?? "") : "no stats from the daemon yet";
  phase.dataset.phase = live.phase ?? "unknown";
  const health = byId("health");
  health.textContent = live.health.status;
  health.dataset.health = live.health.status;
  const age = live.statsAtMs === null ? null : (nowMs - live.statsAtMs) / 1000;
  const stale = age !== null && live.statsIntervalS !== null && age > STALE_INTERVALS * live.statsIntervalS;
  const freshness = byId("freshness");
  freshness.textContent = age === null ? "no stats yet" : `stats ${duration(age)} ago${stale ? " (stale: is the daemon running?)" : ""}`;
  freshness.dataset.stale = String(stale);
  const problems = [
    !streamOk ? "connection to this page's server lost; reconnecting" : null,
    !live.connected ? "the monitor is not connected to NATS" : null,
    live.notice,
    view.caughtUp ? null : "reading the loop's history …",
  ].filter((p): p is string => p !== null);
  const notice = fill("notice", problems.join(" · "));
  notice.hidden = problems.length === 0;

  const banner = byId("degraded");
  const degraded = live.health.status === "degraded";
  banner.hidden = !degraded;
  if (degraded) {
    banner.replaceChildren(
      h("strong", {}, "Degraded"),
      `: ${live.health.cause ?? "no cause given"}`,
      live.health.sinceMs === null ? "" : ` (since ${time(live.health.sinceMs, nowMs)})`,
    );
  }
}

export function renderCards(view: UiSnapshot): void {
  const l = view.live;
  const fillPct = l.roundRows && l.bufferedRows !== null ? Math.min(100, (100 * l.bufferedRows) / l.roundRows) : null;
  fill("card-round", int(l.committedRound));
  fill("card-round-detail", `open ${int(l.openRound)} · training ${l.trainingRound === null ? "none" : int(l.trainingRound)}`);
  fill("card-buffer", `${int(l.bufferedRows)} rows`);
  fill("card-buffer-detail", `${int(l.bufferedRollouts)} rollouts${l.roundRows ? ` · of ${int(l.roundRows)} per round` : ""}`);
  const bar = byId("card-buffer-bar") as HTMLProgressElement;
  bar.hidden = fillPct === null;
  bar.value = fillPct ?? 0;
  bar.textContent = fillPct === null ? "" : `${fillPct.toFixed(0)}%`;
  fill("card-acks", int(l.pendingAcks));
  fill("card-intake", l.rowsPerS === null ? "–" : `${num(l.rowsPerS, 1)} rows/s`);
  fill("card-rejected", int(l.rejectedSinceStart));
  fill("card-adapter", l.servingAdapter === null ? "–" : `r${l.servingAdapter.round}`);
  fill("card-adapter-detail", servingDetail(view));
  fill("card-uptime", duration(l.uptimeS));
  fill("card-gpu", bytes(l.gpuMemoryBytes));
}

export function renderTables(view: UiSnapshot, nowMs: number): void {
  renderRollbacks(view, nowMs);
  fill("reasons-body", ...view.reasons.map((r) =>
    h("tr", { "data-reason": r.reason },
      h("th", { scope: "row" }, h("code", {}, r.reason)),
      h("td", {}, view.meanings.reasons[r.reason] ?? ""),
      h("td", { class: "n" }, int(r.count)),
      h("td", {}, time(r.lastAtMs, nowMs)),
      h("td", { class: "message" }, r.lastMessage)),
  ));
  byId("reasons-empty").hidden = view.reasons.length > 0;

  const replicas = view.replicas.map((r) => r.replica);
  fill("adapters-head", h("tr", {},
    h("th", { scope: "col" }, "round"), h("th", { scope: "col" }, "name"), h("th", { scope: "col" }, "sha256"),
    h("th", { scope: "col" }, "gate"), h("th", { scope: "col", title: "the adapter served now, and what the rollbacks did to each" }, "served"),
    h("th", { scope: "col" }, "at"),
    ...replicas.map((r) => h("th", { scope: "col", title: r }, r))));
  const loads = new Map(view.replicas.map((r) => [r.replica, new Map(r.loads.map((l) => [l.name, l]))]));
  const newest = view.adapters.slice(-ADAPTER_ROWS).reverse();
  const served: Served = { round: view.live.servingAdapter?.round ?? null, notes: rollbackNotes(view.rollbacks) };
  fill("adapters-body", ...newest.map((a) => adapterRow(a, served, replicas, loads, nowMs)));
  fill("adapters-caption", view.adapters.length > ADAPTER_ROWS ? `Adapters (newest ${ADAPTER_ROWS} of ${int(view.adapters.length)})` : "Adapters");
  byId("adapters-empty").hidden = view.adapters.length > 0;

  // a replica still serving another adapter than the loop's (a rollback's target not loaded yet) says so
  const loop = view.live.servingAdapter?.name ?? null;
  fill("replicas-body", ...view.replicas.map((r) => {
    const serving = r.loads.find((l) => l.status === "loaded");
    const last = r.loads[0];
    const behind = loop !== null && serving?.name !== loop;
    return h("tr", { "data-replica": r.replica },
      h("th", { scope: "row" }, r.replica),
      h("td", { class: behind ? "serving behind" : "serving" }, serving?.name ?? "none", behind ? h("span", { class: "aside" }, ` · the loop serves ${loop}`) : null),
      h("td", {}, last ? `${last.name} ${last.status}` : "–"),
      h("td", {}, time(last?.atMs, nowMs)),
      h("td", { class: "message" }, last?.reason ?? ""));
  }));
  byId("replicas-empty").hidden = view.replicas.length > 0;
}

/** The adapter served now and, per adapter round, what the rollbacks did to it (rollbacks.ts). */
interface Served {
  round: number | null;
  notes: Map<number, RollbackNote[]>;
}

function adapterRow(a: AdapterRow, served: Served, replicas: string[], loads: Map<string, Map<string, ReplicaLoad>>, nowMs: number): HTMLTableRowElement {
  const notes = served.notes.get(a.round) ?? [];
  const texts = [...(served.round === a.round ? ["serving now"] : []), ...notes.map((n) => n.text)];
  // an adapter a rollback left or found worse, and not gone back to since, is greyed out
  const last = notes.at(-1);
  const left = last !== undefined && last.kind !== "target" && served.round !== a.round;
  return h("tr", { "data-round": String(a.round), ...(left ? { "data-rolled-back": "" } : {}) },
    h("th", { scope: "row" }, String(a.round)),
    h("td", {}, a.name ?? "–"),
    h("td", { class: "sha", title: a.sha256 ?? "never announced" }, h("code", {}, shortSha(a.sha256))),
    h("td", { class: `verdict ${a.verdict}`, title: a.reason ?? "" }, a.verdict === "passed" ? "passed" : `refused: ${a.reason ?? ""}`),
    h("td", { class: `served${served.round === a.round ? " now" : ""}` }, texts.join(" · ")),
    h("td", {}, time(a.atMs, nowMs)),
    ...replicas.map((replica) => {
      const load = a.name === null ? undefined : loads.get(replica)?.get(a.name);
      return h("td", { class: `load ${load?.status ?? "none"}`, title: load?.reason ?? "" }, load ? (load.status === "loaded" ? "loaded" : "failed") : "–");
    }));
}
