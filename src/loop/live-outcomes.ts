// Live outcomes per serving adapter (issue 23): every committed rollout's episode reward folded into the tally of
// the adapter that served it — count, mean and spread (Welford), min, max, successes — and, when guard.rewardRange
// is set, into that adapter's confidence sequence (confidence-sequence.ts) and its per-group sums, from which paired
// differences with its ancestors are formed. Pure: the round runner folds a round's rollouts into the state record's
// outcomes when it computes the record the round's compare-and-set writes, so each rollout counts exactly once —
// when its round commits — whatever the daemon restarts, and never at admission.
//
// Pairing (guard.pairByGroup): a group is one scenario / start state. When an adapter A and its j-th ancestor B have
// both served a group g, the pair (A, B, g) is formed once, at the first commit where both have it, as
// d = mean_A(g) − mean_B(g) from all their rollouts of g committed so far; later rollouts of g do not change it. Which
// groups pair, and when, depends on which scenarios the workers ran, not on rewards; so if scenarios are drawn
// independently of the past, the pairs of (A, B) are independent draws with mean E_g[m_A(g) − m_B(g)], and the
// paired confidence sequence (on (d + 1) / 2 ∈ [0, 1]) covers that mean at every time. The per-scenario part of the
// noise cancels in d.
import { createHash } from "node:crypto";
import type { AdapterOutcome, LiveOutcomes } from "../contract/index.js";
import { emptyConfidence, observe } from "./confidence-sequence.js";

/** One committed rollout, as the tally needs it. */
export interface ServedRollout {
  /** adapter.round of the rollout: the adapter that served it */
  adapter: number;
  reward: number;
  group?: string | undefined;
}

export interface FoldOptions {
  /** guard.rewardRange; null: tallies only */
  range: { min: number; max: number } | null;
  successThreshold: number | null;
  pairByGroup: boolean;
  maxGroups: number;
  /** guard.baselines: pairs are formed with this many ancestors */
  baselines: number;
  /** tunes the confidence sequences' bets (guard.ts: betAlpha) */
  betAlpha: number;
  pairBetAlpha: number;
  /** the parent of an adapter (its lineage), null when it has none or it is not known */
  parentOf: (round: number) => number | null;
}

/** Adapters whose outcomes the state record keeps (the newest by round). */
export const KEPT_OUTCOMES = 32;
/** Bytes of one group's sums in the state record's JSON, at most (a 12-hex key, a count, a sum, a bit set). */
export const GROUP_SUMS_BYTES = 48;

/** The most bytes the group sums can take in the state record: kept for the adapters pairing looks at. */
export function groupSumsBytes(guard: { baselines: number; maxGroups: number }): number {
  return (guard.baselines + 3) * guard.maxGroups * GROUP_SUMS_BYTES;
}

export function emptyOutcomes(): LiveOutcomes {
  return { range: null, adapters: [] };
}

/** The outcomes with `rollouts` (in stream order) folded in. A new object; the input is not modified. */
export function foldOutcomes(outcomes: LiveOutcomes, rollouts: readonly ServedRollout[], opts: FoldOptions): LiveOutcomes {
  const sameRange = opts.range !== null && outcomes.range !== null && opts.range.min === outcomes.range.min && opts.range.max === outcomes.range.max;
  // a different range makes the sums incomparable: the confidence sequences start over (the tallies stay)
  const byRound = new Map(outcomes.adapters.map((a) => [a.round, sameRange ? clone(a) : { ...clone(a), cs: null, groups: [], pairs: [] }]));
  for (const r of rollouts) {
    let entry = byRound.get(r.adapter);
    if (!entry) {
      entry = emptyOutcome(r.adapter, opts.parentOf(r.adapter), opts.successThreshold);
      byRound.set(r.adapter, entry);
    }
    addReward(entry, r, opts);
  }
  const adapters = [...byRound.values()].sort((a, b) => a.round - b.round).slice(-KEPT_OUTCOMES);
  // groups are kept for the newest adapters only (those the guard can still compare): the record stays small
  const pairing = new Set(adapters.slice(-(opts.baselines + 3)).map((a) => a.round)); // groupSumsBytes counts these
  // the newest maxGroups each: a limit lowered since trims every adapter's at this commit, not only those served now
  for (const a of adapters) a.groups = pairing.has(a.round) ? a.groups.slice(-opts.maxGroups) : [];
  if (opts.range !== null && opts.pairByGroup) formPairs(adapters, opts);
  return { range: opts.range, adapters };
}

function emptyOutcome(round: number, parent: number | null, successThreshold: number | null): AdapterOutcome {
  return { round, parent, count: 0, mean: 0, m2: 0, min: null, max: null, successes: successThreshold === null ? null : 0, clipped: 0, cs: null, groups: [], pairs: [] };
}

function addReward(entry: AdapterOutcome, r: ServedRollout, opts: FoldOptions): void {
  const reward = r.reward;
  entry.count += 1;
  const delta = reward - entry.mean;
  entry.mean += delta / entry.count;
  entry.m2 += delta * (reward - entry.mean);
  entry.min = entry.min === null ? reward : Math.min(entry.min, reward);
  entry.max = entry.max === null ? reward : Math.max(entry.max, reward);
  // a threshold configured after the adapter's first rollouts cannot count those: no rate rather than a wrong one
  if (opts.successThreshold === null) entry.successes = null;
  else if (entry.successes !== null) entry.successes += reward >= opts.successThreshold ? 1 : 0;
  if (opts.range === null) {
    entry.cs = null;
    entry.groups = [];
    entry.pairs = [];
    return;
  }
  const { min, max } = opts.range;
  if (reward < min || reward > max) entry.clipped += 1;
  const x = (Math.min(max, Math.max(min, reward)) - min) / (max - min);
  entry.cs = observe(entry.cs ?? emptyConfidence(), x, opts.betAlpha);
  if (!opts.pairByGroup || r.group === undefined) return;
  const key = groupKey(r.group);
  const found = entry.groups.find((g) => g[0] === key);
  if (found) {
    found[1] += 1;
    found[2] += x;
  } else {
    entry.groups.push([key, 1, x, 0]);
    if (entry.groups.length > opts.maxGroups) entry.groups.shift(); // the newest maxGroups (foldOutcomes trims a lowered limit)
  }
}

/** Every (adapter, ancestor j ≤ baselines, group) both have served and not yet paired becomes one paired observation. */
function formPairs(adapters: AdapterOutcome[], opts: FoldOptions): void {
  const byRound = new Map(adapters.map((a) => [a.round, a]));
  for (const a of adapters) {
    let ancestor = a.parent;
    for (let j = 1; j <= opts.baselines && ancestor !== null; j++) {
      const b = byRound.get(ancestor);
      if (b && b.groups.length > 0) {
        const bGroups = new Map(b.groups.map((g) => [g[0], g]));
        const bit = 1 << (j - 1);
        for (const g of a.groups) {
          const other = bGroups.get(g[0]);
          if (!other || (g[3] & bit) !== 0) continue;
          const d = g[2] / g[1] - other[2] / other[1];
          let pair = a.pairs.find((p) => p.baseline === b.round);
          if (!pair) {
            pair = { baseline: b.round, cs: emptyConfidence() };
            a.pairs.push(pair);
          }
          pair.cs = observe(pair.cs, Math.min(1, Math.max(0, (d + 1) / 2)), opts.pairBetAlpha);
          g[3] |= bit;
        }
      }
      ancestor = b?.parent ?? opts.parentOf(ancestor);
    }
  }
}

/** Groups are compared by a short digest: ids can be long, and the record holds hundreds of them. */
function groupKey(group: string): string {
  return createHash("sha256").update(group).digest("hex").slice(0, 12);
}

function clone(a: AdapterOutcome): AdapterOutcome {
  return { ...a, cs: a.cs && { ...a.cs }, groups: a.groups.map((g) => [...g] as AdapterOutcome["groups"][number]), pairs: a.pairs.map((p) => ({ baseline: p.baseline, cs: { ...p.cs } })) };
}

/** The sample standard deviation of an adapter's rewards (null below two rollouts). */
export function rewardSd(a: Pick<AdapterOutcome, "count" | "m2">): number | null {
  return a.count < 2 ? null : Math.sqrt(a.m2 / (a.count - 1));
}
