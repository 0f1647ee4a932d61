// The page's plots (uPlot: canvas, ~50 KB, draws thousands of points in a few milliseconds). Each chart is a
// spec — title, axis labels with units, how its columns come from the view model — and one uPlot instance that
// gets new columns with setData. Non-finite statistics are gaps on the plot (the tables say NaN).
// The plots whose x axis is a round carry the rollbacks' markers (markers.ts).
// `plotted()` returns exactly the columns handed to uPlot, `marks()` the markers drawn, for the browser test and
// anyone scripting the page.
import uPlot from "uplot";
import type { ReasonRow, RejectionPoint, RoundPoint, UiSnapshot } from "../model.js";
import { h } from "./dom.js";
import { num } from "./format.js";
import { drawMarks, marksSentence, rollbackMarks, type DrawnMark, type Mark } from "./markers.js";

type Column = Array<number | null>;
export interface Plotted {
  x: number[];
  series: Record<string, Column>;
}

interface SeriesSpec {
  label: string;
  color: string;
  dash?: number[];
  /** right-hand axis */
  right?: boolean;
  /** drawn as points only */
  points?: boolean;
  /** drawn as steps (a count that changes at events) */
  stepped?: boolean;
}

interface ChartSpec {
  id: string;
  title: string;
  xLabel: string;
  yLabel: string;
  /** label of the right-hand axis, when a series uses it */
  rightLabel?: string;
  time?: boolean;
  series: (view: UiSnapshot) => SeriesSpec[];
  columns: (view: UiSnapshot) => Plotted;
  /** the parts of the view the chart is drawn from: unchanged parts (the same arrays) mean nothing to redraw */
  deps: (view: UiSnapshot) => unknown[];
  /** uPlot bands: fill between two series (indices into `series`, 1-based as uPlot counts) */
  bands?: Array<[number, number]>;
  /** vertical markers at rounds (the rollbacks), on a plot whose x axis is a round */
  marks?: (view: UiSnapshot) => Mark[];
}

// Okabe–Ito: told apart with the common colour-vision deficiencies
const PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442", "#882255", "#44AA99"];

const STEPPED = uPlot.paths.stepped?.({ align: 1 });

const finite = (v: number | null): number | null => (v !== null && Number.isFinite(v) ? v : null);

function roundChart(id: string, title: string, yLabel: string, fields: Array<{ field: keyof RoundPoint; label: string; dash?: number[] }>): ChartSpec {
  return {
    id, title, xLabel: "round", yLabel,
    deps: (view) => [view.rounds, view.rollbacks],
    marks: (view) => rollbackMarks(view.rollbacks),
    series: () => fields.map((f, i) => ({ label: f.label, color: PALETTE[i] as string, ...(f.dash ? { dash: f.dash } : {}) })),
    columns: (view) => ({
      x: view.rounds.map((r) => r.round),
      series: Object.fromEntries(fields.map((f) => [f.label, view.rounds.map((r) => finite(r[f.field] as number | null))])),
    }),
  };
}

const CHARTS: ChartSpec[] = [
  roundChart("pg_loss", "Policy-gradient loss", "pg_loss (per row)", [{ field: "pg_loss", label: "pg_loss" }]),
  roundChart("kl", "KL to the reference adapter", "KL (nats)", [{ field: "kl", label: "kl" }]),
  roundChart("clip_frac", "Clipped fraction of rows", "clip_frac (fraction)", [{ field: "clip_frac", label: "clip_frac" }]),
  roundChart("logp_gap", "Train/infer log-prob gap of the sampled code", "trainer − vLLM (nats)", [
    { field: "logp_gap", label: "logp_gap" }, { field: "logp_gap_abs", label: "logp_gap_abs", dash: [6, 3] },
  ]),
  roundChart("rows", "Rows trained", "rows", [{ field: "rows", label: "rows" }]),
  roundChart("train_s", "Training time", "train_s (s)", [{ field: "train_s", label: "train_s" }]),
  roundChart("latency_s", "Round latency: closed → adapter announced", "latency (s)", [{ field: "latency_s", label: "latency_s" }]),
  {
    id: "reward", deps: (view) => [view.rewards, view.rollbacks], marks: (view) => rollbackMarks(view.rollbacks), title: "Episode reward by serving adapter", xLabel: "adapter round (0 = initial)", yLabel: "episode reward", rightLabel: "rollouts",
    series: () => [
      { label: "mean", color: PALETTE[0] as string },
      { label: "95% low", color: "#7fb2d7", dash: [4, 3] },
      { label: "95% high", color: "#7fb2d7", dash: [4, 3] },
      { label: "rollouts", color: PALETTE[1] as string, right: true, points: true },
    ],
    columns: (view) => ({
      x: view.rewards.map((r) => r.adapterRound),
      series: {
        mean: view.rewards.map((r) => finite(r.mean)),
        "95% low": view.rewards.map((r) => r.lo),
        "95% high": view.rewards.map((r) => r.hi),
        rollouts: view.rewards.map((r) => r.count),
      },
    }),
    bands: [[3, 2]],
  },
  {
    id: "rejections", title: "Rejected rollouts by reason (cumulative)", xLabel: "time (UTC)", yLabel: "rollouts rejected", time: true,
    // redrawn every time as well: its last point is "now"
    deps: (view) => [view.rejections, view.reasons, Math.floor(Date.now() / 10_000)],
    series: (view) => view.reasons.map((r, i) => ({ label: r.reason, color: PALETTE[i % PALETTE.length] as string, stepped: true })),
    columns: (view) => rejectionColumns(view.rejections, view.reasons, Date.now()),
  },
];

/** At most this many time points on the rejection plot: counts are cumulative, so bucketing loses no total. */
const MAX_TIME_POINTS = 600;

/** Cumulative counts per reason over time, carried on to `nowMs` so the steps reach the present. The rejections
 *  kept are the newest ones; what came before them is the reason's total minus what is kept, so the steps start
 *  there and end at the total. */
export function rejectionColumns(rejections: RejectionPoint[], reasons: ReasonRow[], nowMs: number): Plotted {
  const sorted = rejections.slice().sort((a, b) => a.atMs - b.atMs);
  const first = sorted[0]?.atMs ?? 0;
  const last = sorted.at(-1)?.atMs ?? 0;
  const width = Math.max(1, (last - first) / MAX_TIME_POINTS);
  const x: number[] = [];
  const counts = new Map(reasons.map((r) => [r.reason, r.count]));
  for (const rej of sorted) counts.set(rej.reason, (counts.get(rej.reason) ?? 0) - 1);
  const series: Record<string, Column> = Object.fromEntries(reasons.map((r) => [r.reason, []]));
  const point = (atS: number) => {
    x.push(atS);
    for (const r of reasons) series[r.reason]?.push(counts.get(r.reason) ?? 0);
  };
  sorted.forEach((rej, i) => {
    counts.set(rej.reason, (counts.get(rej.reason) ?? 0) + 1);
    const next = sorted[i + 1];
    // one point per bucket (its last rejection), so a burst stays one step
    if (next !== undefined && Math.floor((next.atMs - first) / width) === Math.floor((rej.atMs - first) / width)) return;
    point(rej.atMs / 1000);
  });
  if (sorted.length > 0 && nowMs > last) point(nowMs / 1000);
  return { x, series };
}

interface Live {
  spec: ChartSpec;
  plot: uPlot;
  deps: unknown[];
  /** series labels the instance was built with (the rejection chart gains a series per new reason) */
  labels: string;
  plotted: Plotted;
  summary: HTMLElement;
}

/** A rollback marker's key, shown under a plot while it has markers. */
const MARK_KEY = "red dashed line ↶ #n: rollback n, at the round that committed it";

export class Charts {
  readonly #live = new Map<string, Live>();
  readonly #root: HTMLElement;
  /** the markers each plot is to draw, read by its draw hook (set before the plot is built: it draws at once) */
  readonly #marks = new Map<string, Mark[]>();
  /** the markers each plot drew last */
  readonly #drawn = new Map<string, DrawnMark[]>();

  constructor(root: HTMLElement) {
    this.#root = root;
    const resize = new ResizeObserver(() => {
      for (const chart of this.#live.values()) chart.plot.setSize(this.#size(chart.plot.root.parentElement as HTMLElement));
    });
    for (const spec of CHARTS) {
      const summary = h("p", { class: "summary", id: `summary-${spec.id}` });
      const holder = h("div", { class: "plot" });
      const key = spec.marks ? h("p", { class: "mark-key", hidden: "" }, MARK_KEY) : null;
      const figure = h("figure", { id: `chart-${spec.id}`, "aria-describedby": summary.id, "data-empty": "true" },
        h("figcaption", {}, spec.title), h("p", { class: "no-data" }, "no data yet"), holder, key, summary);
      root.append(figure);
      resize.observe(holder);
    }
  }

  update(view: UiSnapshot): void {
    for (const spec of CHARTS) {
      const deps = spec.deps(view);
      const previous = this.#live.get(spec.id);
      if (previous && deps.length === previous.deps.length && deps.every((d, i) => d === previous.deps[i])) continue;
      const plotted = spec.columns(view);
      const series = spec.series(view);
      const marks = spec.marks?.(view) ?? [];
      this.#marks.set(spec.id, marks);
      const labels = series.map((s) => s.label).join("\n");
      const holder = this.#root.querySelector(`#chart-${spec.id} .plot`) as HTMLElement;
      const data = [plotted.x, ...series.map((s) => plotted.series[s.label] ?? [])] as uPlot.AlignedData;
      let chart = this.#live.get(spec.id);
      if (!chart || chart.labels !== labels) {
        chart?.plot.destroy();
        const plot = new uPlot(this.#options(spec, series, holder), data, holder);
        chart = { spec, plot, deps, labels, plotted, summary: document.getElementById(`summary-${spec.id}`) as HTMLElement };
        this.#live.set(spec.id, chart);
      } else {
        chart.plot.setData(data);
        chart.plotted = plotted;
        chart.deps = deps;
      }
      chart.summary.textContent = summarise(spec, plotted) + (plotted.x.length > 0 ? marksSentence(marks) : "");
      const figure = holder.parentElement as HTMLElement;
      // an empty plot would draw meaningless axes (a time axis around 1970): the caption says "no data yet" instead
      figure.dataset.empty = String(plotted.x.length === 0);
      const key = figure.querySelector(".mark-key") as HTMLElement | null;
      if (key) key.hidden = marks.length === 0;
    }
  }

  plotted(): Record<string, Plotted> {
    return Object.fromEntries([...this.#live].map(([id, chart]) => [id, chart.plotted]));
  }

  /** The markers each plot drew when it was last drawn (those within its x range). */
  marks(): Record<string, DrawnMark[]> {
    return Object.fromEntries([...this.#drawn]);
  }

  #size(holder: HTMLElement): { width: number; height: number } {
    return { width: Math.max(240, Math.floor(holder.clientWidth)), height: 200 };
  }

  #options(spec: ChartSpec, series: SeriesSpec[], holder: HTMLElement): uPlot.Options {
    const axis = { stroke: "#333", grid: { stroke: "#e6e6e6", width: 1 }, ticks: { stroke: "#ccc", width: 1 }, font: "12px system-ui, sans-serif", labelFont: "12px system-ui, sans-serif" };
    const right = series.some((s) => s.right);
    return {
      ...this.#size(holder),
      scales: {
        // one point (or one round) would otherwise stretch the axis over years
        x: { time: spec.time === true, range: (_u, min, max) => (min === max ? [min - (spec.time ? 60 : 1), max + (spec.time ? 60 : 1)] : [min, max]) },
        // a constant series (a clip fraction of 0) would otherwise get uPlot's 0..100
        y: { range: (_u, min, max) => (min === max ? uPlot.rangeNum(min - (Math.abs(min) / 2 || 1), max + (Math.abs(max) / 2 || 1), 0.1, true) : uPlot.rangeNum(min, max, 0.1, true)) },
        ...(right ? { right: { auto: true } } : {}),
      },
      axes: [
        // rounds are whole numbers: no tick at round 1.5
        { ...axis, label: spec.xLabel, labelSize: 18, ...(spec.time ? {} : { incrs: ROUND_STEPS }) },
        { ...axis, label: spec.yLabel, labelSize: 18, size: 64, values: tickLabels },
        ...(right ? [{ ...axis, scale: "right", side: 1, grid: { show: false }, label: spec.rightLabel ?? "", labelSize: 18, size: 56 }] : []),
      ],
      series: [
        { label: spec.xLabel, ...(spec.time ? {} : { value: (_u: uPlot, v: number | null) => (v === null ? "–" : String(v)) }) },
        ...series.map((s): uPlot.Series => ({
          label: s.label, stroke: s.color, width: 1.5, spanGaps: false,
          value: (_u, v) => num(v),
          ...(s.dash ? { dash: s.dash } : {}),
          ...(s.right ? { scale: "right" } : {}),
          ...(s.points ? { paths: () => null, points: { show: true, size: 5, fill: s.color } } : { points: { size: 4 } }),
          ...(s.stepped ? { paths: STEPPED, points: { show: false } } : {}),
        })),
      ],
      ...(spec.bands ? { bands: spec.bands.map(([a, b]) => ({ series: [a, b] as [number, number], fill: "rgba(0, 114, 178, 0.12)" })) } : {}),
      legend: { live: true },
      // the legend shows the newest values unless the cursor points at others
      hooks: {
        setData: [(u) => showNewest(u)],
        setCursor: [(u) => {
          if (u.cursor.idx === null || u.cursor.idx === undefined) showNewest(u);
        }],
        ...(spec.marks ? { draw: [(u: uPlot) => void this.#drawn.set(spec.id, drawMarks(u, this.#marks.get(spec.id) ?? []))] } : {}),
      },
      cursor: { drag: { x: true, y: false } },
    };
  }
}

/** Tick labels with as many decimals as the tick step needs (a KL axis in steps of 0.00025 must not read
 *  "0.001, 0.001, 0.001"). */
export function tickLabels(_u: uPlot, ticks: number[], _axis: number, _space: number, step: number): string[] {
  const magnitude = Math.floor(Math.log10(step) + 1e-9);
  const mantissa = step / 10 ** magnitude;
  const decimals = Math.min(12, Math.max(0, -magnitude + (Math.abs(mantissa - Math.round(mantissa)) > 1e-6 ? 1 : 0)));
  return ticks.map((t) => (Math.abs(t) >= 1e6 ? t.toExponential(2) : t.toFixed(decimals)));
}

const ROUND_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000];

function showNewest(u: uPlot): void {
  if (u.data[0].length > 0) u.setLegend({ idx: u.data[0].length - 1 });
}

/** One sentence for screen readers (and the tests): the newest value of each series. */
function summarise(spec: ChartSpec, plotted: Plotted): string {
  const n = plotted.x.length;
  if (n === 0) return `${spec.title}: no data yet.`;
  const lastX = plotted.x[n - 1] as number;
  const where = spec.time ? new Date(lastX * 1000).toISOString().slice(11, 19) + " UTC" : `${spec.xLabel} ${lastX}`;
  const values = Object.entries(plotted.series).map(([label, col]) => `${label} ${num(col[n - 1] ?? null)}`);
  return `${spec.title}, ${n} points; at ${where}: ${values.join(", ")}.`;
}
