// The health gate (DESIGN.md data flow step 6): an adapter is published only if every statistic is finite and
// none exceeds its configured threshold (null = off). Pure function.
import type { Config } from "./config.js";
import type { PpoStats } from "./schema.js";

export type GateResult = { ok: true } | { ok: false; reason: string };

const CHECKED = ["pg_loss", "kl", "clip_frac", "logp_gap", "logp_gap_abs"] as const;

export function checkGate(stats: PpoStats, gate: Config["gate"]): GateResult {
  for (const key of CHECKED) {
    if (!Number.isFinite(stats[key])) return { ok: false, reason: `${key} is not finite (${stats[key]})` };
  }
  const limits: Array<[keyof PpoStats & string, number | null, string]> = [
    ["logp_gap_abs", gate.maxLogpGapAbs, "gate.maxLogpGapAbs"],
    ["kl", gate.maxKl, "gate.maxKl"],
    ["clip_frac", gate.maxClipFrac, "gate.maxClipFrac"],
  ];
  for (const [key, limit, name] of limits) {
    const value = stats[key] as number;
    if (limit !== null && value > limit) return { ok: false, reason: `${key} ${value} exceeds ${name} ${limit}` };
  }
  return checkMismatch(stats, gate.maxMismatchKl);
}

/** Sampler/trainer mismatch KL (k3) from the trainer's optional `mismatch` statistics (--mismatch-stats). */
function checkMismatch(stats: PpoStats, limit: number | null): GateResult {
  if (limit === null) return { ok: true };
  const k3 = (stats["mismatch"] as { k3?: unknown } | undefined)?.k3;
  if (typeof k3 !== "number") return { ok: false, reason: "gate.maxMismatchKl is set but stats.json has no mismatch.k3 (run the trainer with --mismatch-stats)" };
  if (!Number.isFinite(k3)) return { ok: false, reason: `mismatch.k3 is not finite (${k3})` };
  return k3 > limit ? { ok: false, reason: `mismatch.k3 ${k3} exceeds gate.maxMismatchKl ${limit}` } : { ok: true };
}
