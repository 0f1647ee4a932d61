// How the view model travels to the page (JSON, over SSE and /api/snapshot). Two things plain JSON.stringify would
// get wrong or slow:
//   - a diverged round's statistics are NaN or ±Infinity, which JSON writes as null; the page must show them as
//     such, so they travel as the strings "NaN", "Infinity", "-Infinity", as on the wire. Only rounds' and rewards'
//     statistics can be non-finite, so only those fields are converted (a replacer or reviver called on every
//     value of a long run's snapshot costs more than the rest of its encoding);
//   - a list of rows repeats every key in every row: lists travel as tables, the keys once and one array per row,
//     which makes a 5,000-round snapshot less than half as long to send and to parse.
// Imported by the server and the page.
import type { UiPatch, UiSnapshot } from "./model.js";

type View = UiSnapshot | UiPatch;
interface Table {
  keys: string[];
  rows: unknown[][];
}

const TABLES = ["rounds", "rewards", "reasons", "rejections", "adapters", "rollbacks"] as const;
const STATS: Partial<Record<(typeof TABLES)[number], readonly string[]>> = {
  rounds: ["pg_loss", "kl", "clip_frac", "logp_gap", "logp_gap_abs", "rows", "train_s", "latency_s"],
  rewards: ["mean", "sd", "lo", "hi"],
};
const NON_FINITE = new Set(["NaN", "Infinity", "-Infinity"]);

function toTable(rows: object[], stats: readonly string[]): Table {
  // every row of a list is built by the same code, with the same keys: the first row's are the table's
  const keys = rows.length > 0 ? Object.keys(rows[0] as object) : [];
  const converted = keys.map((k) => stats.includes(k));
  const out: unknown[][] = new Array(rows.length);
  for (let r = 0; r < rows.length; r++) {
    const row = rows[r] as Record<string, unknown>;
    const values: unknown[] = new Array(keys.length);
    for (let i = 0; i < keys.length; i++) {
      const v = row[keys[i] as string];
      values[i] = converted[i] && typeof v === "number" && !Number.isFinite(v) ? String(v) : v;
    }
    out[r] = values;
  }
  return { keys, rows: out };
}

function fromTable(table: Table, stats: readonly string[]): object[] {
  const converted = table.keys.map((k) => stats.includes(k));
  return table.rows.map((values) => {
    const row: Record<string, unknown> = {};
    table.keys.forEach((k, i) => {
      const v = values[i];
      row[k] = converted[i] && typeof v === "string" && NON_FINITE.has(v) ? Number(v) : v;
    });
    return row;
  });
}

export function encodeView(view: View): string {
  const out: Record<string, unknown> = { ...view };
  for (const name of TABLES) {
    const rows = view[name];
    if (rows) out[name] = toTable(rows, STATS[name] ?? []);
  }
  return JSON.stringify(out);
}

export function decodeView<T extends View>(text: string): T {
  const raw = JSON.parse(text) as Record<string, unknown>;
  for (const name of TABLES) {
    const table = raw[name] as Table | undefined;
    if (table) raw[name] = fromTable(table, STATS[name] ?? []);
  }
  return raw as unknown as T;
}
