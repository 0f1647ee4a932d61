// The rollbacks (issue 23: the live-outcome guard's, and operators' `rlloop rollback`) as the page tells them: the
// Rollbacks table, newest first, each with its evidence in words; and what the rollbacks say about an adapter
// wherever else the page names one — the adapter served now (a rollback's target, or the round trained again from
// it) and the adapters a rollback left. The words are pure functions of the view model, tested without a browser.
import type { RollbackEvidence, RollbackRow, RollbackSide, UiSnapshot } from "../model.js";
import { byId, fill, h } from "./dom.js";
import { int, num, shortSha, time } from "./format.js";

/** Rollbacks shown in the table; the plots' markers carry them all. */
export const ROLLBACK_ROWS = 100;

export function renderRollbacks(view: UiSnapshot, nowMs: number): void {
  const newest = view.rollbacks.slice(-ROLLBACK_ROWS).reverse();
  fill("rollbacks-body", ...newest.map((r) => rollbackRow(r, view.meanings.triggers, nowMs)));
  fill("rollbacks-caption", view.rollbacks.length > ROLLBACK_ROWS ? `Rollbacks (newest ${ROLLBACK_ROWS} of ${int(view.rollbacks.length)})` : "Rollbacks");
  byId("rollbacks-empty").hidden = view.rollbacks.length > 0;
}

function rollbackRow(r: RollbackRow, triggers: Record<string, string>, nowMs: number): HTMLTableRowElement {
  return h("tr", { "data-seq": String(r.seq), "data-trigger": r.trigger },
    h("th", { scope: "row" }, `#${r.seq}`),
    h("td", {}, time(r.atMs, nowMs)),
    h("td", { class: `trigger ${r.trigger}`, title: triggers[r.trigger] ?? "" }, r.trigger),
    h("td", { class: "move", title: `now serving ${r.toName}${r.toSha256 === null ? "" : ` (sha256 ${r.toSha256})`}` }, `r${r.fromRound} → r${r.toRound}`),
    h("td", { class: "regressed" }, r.regressedRound === null ? "–" : `r${r.regressedRound}`),
    h("td", { class: "n", title: roundMeaning(r) }, String(r.committedRound)),
    h("td", { class: "evidence" }, evidenceText(r.evidence)),
    h("td", { class: "message" }, r.reason));
}

/** What the committing round did, for the round cell's title. */
export function roundMeaning(r: RollbackRow): string {
  return r.trigger === "guard"
    ? `round ${r.committedRound}'s commit found the regression; that round trained again from r${r.toRound}`
    : `done after round ${r.committedRound}; round ${r.committedRound + 1} continues r${r.toRound}`;
}

/** The guard's evidence in one line: its test, both sides' counts, means and bounds, and the decision's numbers. */
export function evidenceText(e: RollbackEvidence | null): string {
  if (e === null) return "none: an operator's rollback";
  const side = (s: RollbackSide, bound: string) => `r${s.round}: ${int(s.count)} rollouts, mean ${num(s.mean)}, ${bound} bound ${num(s.bound)}`;
  const test = e.test === "paired" ? `paired test over ${int(e.pairs)} groups` : "unpaired test";
  return `${test} · ${side(e.candidate, "upper")} · ${side(e.baseline, "lower")} · `
    + `upper bound of r${e.candidate.round} − r${e.baseline.round}: ${num(e.differenceUpper)} (a rollback needs < ${num(-e.minEffect)}) · α ${num(e.alpha)}`;
}

/** What the newest rollback says of the adapter served now: that it is its target, or the round trained again from
 *  it (a guard's rollback); null when the loop has moved on since, or no rollback happened. */
export function servingNote(view: Pick<UiSnapshot, "live" | "rollbacks">): string | null {
  const serving = view.live.servingAdapter;
  const last = view.rollbacks.at(-1);
  if (serving === null || last === undefined) return null;
  if (serving.round === last.toRound) return `rolled back from r${last.fromRound} (#${last.seq}, ${last.trigger})`;
  if (serving.round === last.committedRound && last.trigger === "guard") return `trained again from r${last.toRound} after rollback #${last.seq}`;
  return null;
}

/** The serving adapter card's detail line: its sha256 and what a rollback says of it. */
export function servingDetail(view: Pick<UiSnapshot, "live" | "rollbacks">): string {
  const serving = view.live.servingAdapter;
  if (serving === null) return "";
  const note = servingNote(view);
  return note === null ? shortSha(serving.sha256) : `${shortSha(serving.sha256)} · ${note}`;
}

/** What one rollback did to an adapter: left it (the adapter served before), found it worse (the guard's
 *  candidate, when an ancestor of the one left), or went back to it. */
export interface RollbackNote {
  kind: "left" | "worse" | "target";
  seq: number;
  text: string;
}

/** Per adapter round, what the rollbacks did to it, oldest rollback first. Built once per render: the table looks
 *  each row up. */
export function rollbackNotes(rollbacks: readonly RollbackRow[]): Map<number, RollbackNote[]> {
  const notes = new Map<number, RollbackNote[]>();
  const add = (round: number, note: RollbackNote) => {
    const list = notes.get(round);
    if (list) list.push(note);
    else notes.set(round, [note]);
  };
  for (const r of rollbacks) {
    add(r.fromRound, { kind: "left", seq: r.seq, text: `rolled back #${r.seq} → r${r.toRound}` });
    if (r.regressedRound !== null && r.regressedRound !== r.fromRound) add(r.regressedRound, { kind: "worse", seq: r.seq, text: `found worse #${r.seq}` });
    add(r.toRound, { kind: "target", seq: r.seq, text: `target of #${r.seq}` });
  }
  return notes;
}
