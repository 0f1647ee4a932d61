// The page's entry: one Server-Sent Events stream (the snapshot, then patches; the browser reconnects on its own
// and the server starts each connection with a fresh snapshot), rendered at most once per animation frame, and
// the ages in the header ticked every second. `window.rlloopUi` exposes the view, the plotted columns and the
// rollback markers drawn.
import "uplot/dist/uPlot.min.css";
import "./style.css";
import type { UiPatch, UiSnapshot } from "../model.js";
import { decodeView } from "../view-codec.js";
import { Charts, type Plotted } from "./charts.js";
import { byId } from "./dom.js";
import type { DrawnMark } from "./markers.js";
import { renderCards, renderHeader, renderTables } from "./panels.js";
import { applyPatch } from "./view-state.js";

declare global {
  interface Window {
    rlloopUi: {
      /** true once the first snapshot is drawn */
      ready: boolean;
      /** when it was (performance.now(): ms since the navigation started), for the load bench */
      firstDrawMs: number | null;
      view(): UiSnapshot | null;
      plotted(): Record<string, Plotted>;
      /** per plot, the rollback markers it drew (at canvas pixel x) */
      marks(): Record<string, DrawnMark[]>;
    };
  }
}

let view: UiSnapshot | null = null;
let streamOk = true;
/** a redraw is scheduled */
let pending = false;
/** Redraws at most this often: a busy loop patches every 100 ms, and redrawing 5,000-point plots that often would
 *  keep a laptop's fan busy for no reader's benefit. */
const MIN_REDRAW_MS = 250;
let lastRender = 0;
const charts = new Charts(byId("charts"));

window.rlloopUi = { ready: false, firstDrawMs: null, view: () => view, plotted: () => charts.plotted(), marks: () => charts.marks() };

function render(): void {
  pending = false;
  lastRender = performance.now();
  if (!view) return;
  const now = Date.now();
  renderHeader(view, now, streamOk);
  renderCards(view);
  charts.update(view);
  renderTables(view, now);
  document.body.dataset.revision = String(view.revision);
  if (!window.rlloopUi.ready) window.rlloopUi.firstDrawMs = performance.mark("rlloop:drawn").startTime;
  window.rlloopUi.ready = true;
}

function schedule(): void {
  if (pending) return;
  pending = true;
  const wait = Math.max(0, lastRender + MIN_REDRAW_MS - performance.now());
  window.setTimeout(() => requestAnimationFrame(render), wait);
}

const events = new EventSource(new URL("api/events", window.location.href));
events.addEventListener("snapshot", (e) => {
  // marks for the load bench: when the snapshot arrived, when it was decoded, when it was drawn
  if (!window.rlloopUi.ready) performance.mark("rlloop:snapshot-received");
  view = decodeView<UiSnapshot>((e as MessageEvent<string>).data);
  if (!window.rlloopUi.ready) performance.mark("rlloop:snapshot-decoded");
  streamOk = true;
  // a whole new view is drawn at once; waiting for the next frame only delays the first paint
  render();
});
events.addEventListener("patch", (e) => {
  if (!view) return;
  view = applyPatch(view, decodeView<UiPatch>((e as MessageEvent<string>).data));
  schedule();
});
events.addEventListener("error", () => {
  streamOk = false;
  if (view) renderHeader(view, Date.now(), streamOk);
});

setInterval(() => {
  if (view) renderHeader(view, Date.now(), streamOk);
}, 1000);
