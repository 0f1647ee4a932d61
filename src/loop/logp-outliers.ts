// Rollouts whose sampler log-probs the trainer does not recognise (`gate.maxRolloutLogpGapAbs`). The round's gate
// judges means over rows (logp_gap_abs, mismatch.k3), and one rollout with a wrong vllm_logp — a value far below
// what its adapter gave its codes, yet above limits.minLogp — moves those means past their limits alone: the whole
// round would be rejected, its good rollouts consumed untrained. Each rollout is judged by its own rows first: one
// far from the trainer, while most of its round agree, is what is wrong, and only it is taken out. When half or more
// are far, the sampler and the trainer disagree as a whole (another adapter served, another dtype) and no rollout
// is singled out: the round's gate decides, as before.
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
  const culprits: Culprit[] = [];
  let row = 0; // train.jsonl holds the events' rows in the manifest's order (assemble.ts)
  for (const event of manifest.events) {
    const own = gaps.slice(row, (row += event.rows));
    const meanAbs = own.reduce((s, g) => s + Math.abs(g), 0) / own.length;
    // a NaN gap is the trainer's (vllm_logp is finite by validation): the statistics' check judges it, not this
    if (!(meanAbs > limit) || !Number.isFinite(meanAbs)) continue;
    const error = `its trainer − sampler log-prob gap |Σ old − vllm_logp| averages ${meanAbs.toPrecision(4)} over its ${event.rows} step(s), above gate.maxRolloutLogpGapAbs ${limit}`;
    culprits.push({ seq: event.seq, id: event.id, rows: event.rows, error, reason: "logp_mismatch" });
  }
  return culprits.length > 0 && culprits.length * 2 < manifest.events.length ? { kind: "outliers", culprits } : { kind: "none" };
}

/** The gaps, or why they cannot be read (a trainer that does not write them: the seed). */
async function readGaps(file: string): Promise<number[] | string> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ENOENT" ? `the trainer wrote no ${LOGP_GAPS_FILE}` : (err as Error).message;
  }
  const parsed = LogpGaps.safeParse((() => {
    try {
      return decodeWithNonFinite(text);
    } catch {
      return undefined;
    }
  })());
  return parsed.success ? parsed.data.gaps : `${file} is not a gaps record`;
}
