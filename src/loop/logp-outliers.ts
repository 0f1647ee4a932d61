// Rollouts whose sampler log-probs stand apart from their round's (`gate.maxRolloutLogpGapAbs`). The round's gate
// judges means over rows (logp_gap_abs, mismatch.k3), and one rollout with a wrong vllm_logp — a value far from what
// its adapter gave its codes, yet above limits.minLogp — moves those means past their limits alone: the whole round
// would be rejected, its good rollouts consumed untrained. So when a round fails one of those gates, each rollout's
// own gap (the mean over its steps of |Σ old − vllm_logp|) is compared with the median of its round's: one above it
// by more than the limit, while fewer than half of its round are, is what is wrong, and only it is taken out. A round
// whose gaps are all shifted (another adapter served, another precision) singles no rollout out: the sampler and the
// trainer disagree as a whole, and the round's gate decides, as before. Half of a round can be above the median (an
// even count: one of two); those are singled out only where the other half agrees with the trainer (gaps within the
// limit): the trainer is the reference, and half the round meeting it exactly is no coincidence — a round of two
// rollouts, one wrong, would else fail its gate for that one. The trainer's log-probs are those of the
// adapter the round trains from: the rollouts of an older one (admitted off-policy, or a regressed adapter's in a
// round trained again from a rollback's target) carry the policy's change since in their gap too, shared by the
// others served alike; the limit is meant far above it. They are judged with the rest: many of a steady round's
// rollouts are served by the adapter before its parent, and leaving them out would leave a wrong one among them free
// to fail its round.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { decodeWithNonFinite, LOGP_GAPS_FILE, LogpGaps, type Manifest } from "../contract/index.js";
import type { Culprit } from "./poison-isolation.js";

export type OutlierCheck =
  | { kind: "none" }
  | { kind: "unchecked"; why: string }
  | { kind: "outliers"; culprits: Culprit[] };

/** The rollouts of `manifest` to take out, judged from the attempt's `outDir`; `limit` in nats. */
export async function logpOutliers(manifest: Manifest, outDir: string, limit: number | null): Promise<OutlierCheck> {
  if (limit === null) return { kind: "none" };
  const gaps = await readGaps(join(outDir, LOGP_GAPS_FILE));
  if (typeof gaps === "string") return { kind: "unchecked", why: gaps };
  if (gaps.length !== manifest.rows) return { kind: "unchecked", why: `${LOGP_GAPS_FILE} has ${gaps.length} rows, the round ${manifest.rows}` };
  let row = 0; // train.jsonl holds the events' rows in the manifest's order (assemble.ts)
  const own = manifest.events.map((event) => {
    const rows = gaps.slice(row, (row += event.rows));
    return { event, gap: rows.reduce((s, g) => s + Math.abs(g), 0) / rows.length };
  });
  // a NaN gap is the trainer's (vllm_logp is finite by validation): the statistics' check judges it, not this
  if (!own.every((o) => Number.isFinite(o.gap))) return { kind: "unchecked", why: `${LOGP_GAPS_FILE} holds a gap that is not finite` };
  if (own.length === 0) return { kind: "none" };
  const center = median(own.map((o) => o.gap));
  const far = own.filter((o) => o.gap - center > limit);
  if (far.length === 0) return { kind: "none" };
  if (far.length * 2 >= own.length && !own.every((o) => far.includes(o) || o.gap <= limit)) return { kind: "none" };
  return {
    kind: "outliers",
    culprits: far.map(({ event, gap }) => ({
      seq: event.seq, id: event.id, rows: event.rows, reason: "logp_mismatch",
      error: `its trainer − sampler log-prob gap |Σ old − vllm_logp| averages ${gap.toPrecision(4)} over its ${event.rows} step(s), ${(gap - center).toPrecision(4)} above its round's median ${center.toPrecision(4)}: more than gate.maxRolloutLogpGapAbs ${limit}`,
    })),
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The gaps, or why they cannot be read (a trainer that does not write them: the seed). */
async function readGaps(file: string): Promise<number[] | string> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ENOENT" ? `the trainer wrote no ${LOGP_GAPS_FILE}` : (err as Error).message;
  }
  let value: unknown;
  try {
    value = decodeWithNonFinite(text);
  } catch {
    return `${file} is not JSON`;
  }
  const parsed = LogpGaps.safeParse(value);
  return parsed.success ? parsed.data.gaps : `${file} is not a gaps record`;
}
