// Rollback markers on the per-round plots: a dashed vertical line at the round that committed each rollback, so a
// curve's drop (the reward of the regressed adapters, a jump of the KL) lines up with the rollback that answered
// it. Drawn on the plot's canvas after the series (a uPlot draw hook), clipped to the rounds the plot shows: a
// rollback naming a round the page has never seen draws nothing there and never stretches an axis. Several
// rollbacks committed by one round are one line (one label), so a burst of them stays readable.
import uPlot from "uplot";
import type { RollbackRow } from "../model.js";

/** One marker: a round, and the rollbacks it committed (by seq, ascending). */
export interface Mark {
  round: number;
  seqs: number[];
}

/** A marker as drawn: `x` in the canvas's pixels (what a test reads the canvas at). */
export interface DrawnMark extends Mark {
  x: number;
}

/** Not one of the series' colours (charts.ts: Okabe–Ito), and the page's colour for what was refused or undone. */
export const MARK_COLOR = "#b00020";

/** The markers of a list of rollbacks, one per committing round, in round order. */
export function rollbackMarks(rollbacks: readonly RollbackRow[]): Mark[] {
  const byRound = new Map<number, number[]>();
  for (const r of rollbacks) {
    const seqs = byRound.get(r.committedRound);
    if (seqs) seqs.push(r.seq);
    else byRound.set(r.committedRound, [r.seq]);
  }
  return [...byRound].sort(([a], [b]) => a - b).map(([round, seqs]) => ({ round, seqs: seqs.sort((a, b) => a - b) }));
}

/** The marker's label: its rollback, or the first of them and how many more. */
export function markLabel(mark: Mark): string {
  const more = mark.seqs.length - 1;
  return `↶ #${mark.seqs[0] ?? "?"}${more > 0 ? ` +${more}` : ""}`;
}

/** One sentence about the markers, for the plot's screen-reader summary. */
export function marksSentence(marks: readonly Mark[]): string {
  const count = marks.reduce((n, m) => n + m.seqs.length, 0);
  const last = marks.at(-1);
  if (last === undefined) return "";
  if (marks.length === 1) return ` Rollback${count > 1 ? "s" : ""} at round ${last.round} (${last.seqs.map((s) => `#${s}`).join(", ")}).`;
  return ` ${count} rollbacks at ${marks.length} rounds, the last at round ${last.round}.`;
}

/** Draws the markers that fall within the plot's x range; returns those it drew. */
export function drawMarks(u: uPlot, marks: readonly Mark[]): DrawnMark[] {
  const { min, max } = u.scales.x ?? {};
  if (min === undefined || max === undefined || marks.length === 0) return [];
  const { left, top, width, height } = u.bbox;
  const ratio = uPlot.pxRatio;
  const ctx = u.ctx;
  const drawn: DrawnMark[] = [];
  ctx.save();
  ctx.beginPath();
  ctx.rect(left, top, width, height);
  ctx.clip();
  ctx.strokeStyle = MARK_COLOR;
  ctx.fillStyle = MARK_COLOR;
  // a whole number of pixels wide, on whole pixels: the line's colour is exact, not blended with the background
  ctx.lineWidth = Math.max(2, Math.round(2 * ratio));
  ctx.setLineDash([6 * ratio, 4 * ratio]);
  ctx.font = `${Math.round(11 * ratio)}px system-ui, sans-serif`;
  // the axes leave their own alignment on the shared context: the label starts right of its line
  ctx.textAlign = "left";
  ctx.textBaseline = "top";
  // labels that would overlap the previous one are left out; the line is always drawn
  let labelEnd = -Infinity;
  for (const mark of marks) {
    if (mark.round < min || mark.round > max) continue;
    const x = Math.round(u.valToPos(mark.round, "x", true));
    ctx.beginPath();
    ctx.moveTo(x, top);
    ctx.lineTo(x, top + height);
    ctx.stroke();
    const label = markLabel(mark);
    const textWidth = ctx.measureText(label).width;
    // right of its line, or left of it where the plot ends
    const textX = x + 3 * ratio + textWidth <= left + width ? x + 3 * ratio : x - 3 * ratio - textWidth;
    if (textX > labelEnd) {
      ctx.fillText(label, textX, top + 2 * ratio);
      labelEnd = textX + textWidth + 4 * ratio;
    }
    drawn.push({ ...mark, x });
  }
  ctx.restore();
  return drawn;
}
