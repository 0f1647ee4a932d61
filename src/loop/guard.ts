// The live-outcome guard's decision (issue 23; docs/daemon.md "The live-outcome guard"): is the serving lineage
// worse on the robots than one of its recent ancestors? Pure, from the live outcomes (live-outcomes.ts) and the
// lineage; the round runner asks it when it computes a round's commit, the daemon's stats report it.
//
// The adapter under test, C, is the nearest adapter of the serving lineage (the served one, its parent, …) with at
// least guard.minRollouts committed rollouts; its baselines are its guard.baselines = K nearest ancestors (a set
// fixed by the lineage), those with guard.minRollouts rollouts taking part. Null hypothesis for C: its mean reward
// is at least max_B μ_B − guard.minEffect (it is not worse than the best of them by more than the effect). C is
// rolled back, to the better baseline, when either test rejects:
//   - unpaired: U_C < L_B − minEffect for some B, with U_C the upper bound of C's confidence sequence at α_u/2 and
//     L_B the lower bound of B's at α_u/(2K);
//   - paired (guard.pairByGroup): the upper bound of the per-group differences C − B at α_p/K is below −minEffect.
// α_u = α_p = α/2 when pairing is on, α_u = α when it is off. Every confidence sequence holds at all times at once
// (confidence-sequence.ts), so by the union bound, under the null hypothesis the probability that C is ever rolled
// back — however many rounds the guard looks at it — is at most α_u/2 + K·α_u/(2K) + K·α_p/K = α. That is the
// stated false-rollback rate, per adapter; a bench measures it (bench/guard-simulation.ts, bench/RESULTS.md).
// Assumptions: rewards within guard.rewardRange (outside ones count at the bound), and for each adapter a reward
// distribution that does not drift while it serves (for the paired test: scenarios drawn independently of the past).
import type { AdapterOutcome, GuardEvidence, LiveOutcomes } from "../contract/index.js";
import type { GuardConfig } from "./config/index.js";
import { lowerBound, upperBound } from "./confidence-sequence.js";
import { rewardSd } from "./live-outcomes.js";

export type GuardVerdict =
  | { status: "off"; reason: string }
  | { status: "waiting"; candidate: number | null; reason: string }
  | { status: "ok"; candidate: number; baselines: number[]; margin: number | null }
  | { status: "regressed"; candidate: number; target: number; evidence: GuardEvidence };

/** The levels every bound is read at (and the bets are tuned for). */
export function guardLevels(config: Pick<GuardConfig, "alpha" | "baselines" | "pairByGroup">) {
  const unpaired = config.pairByGroup ? config.alpha / 2 : config.alpha;
  return {
    candidate: unpaired / 2,
    baseline: unpaired / (2 * config.baselines),
    pair: config.pairByGroup ? config.alpha / 2 / config.baselines : 0,
  };
}

/** The α the confidence sequences' bets are tuned for (any fixed value keeps the bounds valid). */
export function betAlphas(config: Pick<GuardConfig, "alpha" | "baselines" | "pairByGroup">): { single: number; pair: number } {
  const levels = guardLevels(config);
  return { single: levels.candidate, pair: levels.pair > 0 ? levels.pair : levels.candidate };
}

export interface GuardInput {
  outcomes: LiveOutcomes;
  /** the adapter served now (state.adapter.round) */
  serving: number;
  parentOf: (round: number) => number | null;
  config: GuardConfig;
}

export function judgeLineage({ outcomes, serving, parentOf, config }: GuardInput): GuardVerdict {
  const range = outcomes.range;
  if (config.rewardRange === null || range === null) return { status: "off", reason: "guard.rewardRange is not set" };
  const byRound = new Map(outcomes.adapters.map((a) => [a.round, a]));
  const enough = (a: AdapterOutcome | undefined): a is AdapterOutcome & { cs: NonNullable<AdapterOutcome["cs"]> } =>
    a !== undefined && a.cs !== null && a.count >= config.minRollouts;
  const parent = (round: number) => byRound.get(round)?.parent ?? parentOf(round);
  // the nearest adapter of the serving lineage with enough rollouts (a just-published one has none yet)
  let candidate: number | null = serving;
  for (let depth = 0; candidate !== null && !enough(byRound.get(candidate)); depth++) {
    candidate = depth > config.baselines ? null : parent(candidate);
  }
  if (candidate === null) return { status: "waiting", candidate: null, reason: `no adapter of the serving lineage has guard.minRollouts (${config.minRollouts}) rollouts yet` };
  const c = byRound.get(candidate) as AdapterOutcome & { cs: NonNullable<AdapterOutcome["cs"]> };
  const ancestors: number[] = [];
  for (let round = parent(candidate); round !== null && ancestors.length < config.baselines; round = parent(round)) ancestors.push(round);
  const baselines = ancestors.map((r) => byRound.get(r)).filter(enough);
  if (baselines.length === 0) return { status: "waiting", candidate, reason: `no ancestor of r${candidate} among its ${config.baselines} nearest has guard.minRollouts (${config.minRollouts}) rollouts` };

  const levels = guardLevels(config);
  const width = range.max - range.min;
  const toReward = (x: number) => range.min + width * x;
  const upperC = toReward(upperBound(c.cs, levels.candidate));
  const found: GuardEvidence[] = [];
  let margin = Number.POSITIVE_INFINITY;
  for (const b of baselines) {
    const lowerB = toReward(lowerBound(b.cs, levels.baseline));
    const side = (a: AdapterOutcome, bound: number) => ({ round: a.round, count: a.count, mean: a.mean, bound });
    const base = { alpha: config.alpha, min_effect: config.minEffect, candidate: side(c, upperC), baseline: side(b, lowerB) };
    const unpaired = upperC - lowerB;
    margin = Math.min(margin, unpaired + config.minEffect);
    if (unpaired < -config.minEffect) found.push({ ...base, test: "unpaired", pairs: null, difference_upper: unpaired });
    const pair = config.pairByGroup ? c.pairs.find((p) => p.baseline === b.round) : undefined;
    if (pair && pair.cs.t > 0) {
      const paired = width * (2 * upperBound(pair.cs, levels.pair) - 1);
      margin = Math.min(margin, paired + config.minEffect);
      if (paired < -config.minEffect) found.push({ ...base, test: "paired", pairs: pair.cs.t, difference_upper: paired });
    }
  }
  if (found.length === 0) return { status: "ok", candidate, baselines: baselines.map((b) => b.round), margin: Number.isFinite(margin) ? margin : null };
  // go back to the better of the baselines the evidence says are better (the highest mean reward)
  const best = found.reduce((x, y) => (y.baseline.mean > x.baseline.mean ? y : x));
  return { status: "regressed", candidate, target: best.baseline.round, evidence: best };
}

/** The verdict on a committed record's serving lineage (what the stats report between commits). */
export function verdictOf(record: { outcomes: LiveOutcomes; adapter: { round: number }; lineage: ReadonlyArray<{ round: number; parent: number | null }> }, config: GuardConfig): GuardVerdict {
  const parents = new Map(record.lineage.map((e) => [e.round, e.parent]));
  return judgeLineage({ outcomes: record.outcomes, serving: record.adapter.round, parentOf: (r) => parents.get(r) ?? null, config });
}

/** An adapter's outcome as the stats event, the `rounds` answer and watch show it. */
export function outcomeSummary(a: AdapterOutcome, config: Pick<GuardConfig, "alpha" | "baselines" | "pairByGroup">, range: LiveOutcomes["range"]) {
  const levels = guardLevels(config);
  const toReward = (x: number) => (range === null ? x : range.min + (range.max - range.min) * x);
  return {
    round: a.round,
    parent: a.parent,
    count: a.count,
    mean: a.count > 0 ? a.mean : null,
    sd: rewardSd(a),
    min: a.min,
    max: a.max,
    success_rate: a.successes === null || a.count === 0 ? null : a.successes / a.count,
    clipped: a.clipped,
    lower: a.cs && range ? toReward(lowerBound(a.cs, levels.baseline)) : null,
    upper: a.cs && range ? toReward(upperBound(a.cs, levels.candidate)) : null,
  };
}
