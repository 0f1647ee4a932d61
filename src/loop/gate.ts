// The health gate (DESIGN.md data flow step 6): an adapter is published only if every statistic is finite and
// none exceeds its configured threshold (null = off). Pure function.
import { GATED_STATS, type PpoStats } from "../contract/index.js";
import type { Config } from "./config/index.js";

export type GateResult = { ok: true } | { ok: false; reason: string };

export function checkGate(stats: PpoStats, gate: Config["gate"]): GateResult {
  const garbage = nonFiniteStat(stats);
  if (garbage !== null) return { ok: false, reason: garbage };
  const limits: Array<[(typeof GATED_STATS)[number], number | null, string]> = [
    ["logp_gap_abs", gate.maxLogpGapAbs, "gate.maxLogpGapAbs"],
    ["kl", gate.maxKl, "gate.maxKl"],
    ["clip_frac", gate.maxClipFrac, "gate.maxClipFrac"],
  ];
  for (const [key, limit, name] of limits) {
    const value = stats[key];
    if (exceeds(value, limit)) return { ok: false, reason: `${key} ${value} exceeds ${name} ${limit}` };
  }
  return checkMismatch(stats, gate.maxMismatchKl);
}

/** Whether the statistics exceed a limit one rollout's vllm_logp can move alone (logp_gap_abs, mismatch.k3): the
 *  rounds whose rollouts logp-outliers.ts looks at one by one. */
export function failsLogpGate(stats: PpoStats, gate: Config["gate"]): boolean {
  return exceeds(stats.logp_gap_abs, gate.maxLogpGapAbs) || exceeds(stats.mismatch?.k3, gate.maxMismatchKl);
}

const exceeds = (value: number | undefined, limit: number | null): boolean => limit !== null && value !== undefined && value > limit;

/** Sampler/trainer mismatch KL (k3) from the trainer's optional mismatch statistics (trainer.mismatchStats). */
function checkMismatch(stats: PpoStats, limit: number | null): GateResult {
  if (limit === null) return { ok: true };
  const k3 = stats.mismatch?.k3;
  if (k3 === undefined) return { ok: false, reason: "gate.maxMismatchKl is set but stats.json has no mismatch.k3 (set trainer.mismatchStats)" };
  if (!Number.isFinite(k3)) return { ok: false, reason: `mismatch.k3 is not finite (${k3})` };
  return k3 > limit ? { ok: false, reason: `mismatch.k3 ${k3} exceeds gate.maxMismatchKl ${limit}` } : { ok: true };
}

/** The first gated statistic that is not a finite number, said as the gate says it; null when all are finite. */
export function nonFiniteStat(stats: PpoStats): string | null {
  const key = GATED_STATS.find((k) => !Number.isFinite(stats[k]));
  return key === undefined ? null : `${key} is not finite (${stats[key]})`;
}
