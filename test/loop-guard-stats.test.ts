// The live-outcome guard's statistics, pure (issue 23): the empirical-Bernstein confidence sequence covers the mean
// at every time at once (Monte Carlo, over whole paths: checking after every observation does not inflate the error),
// adapts to the spread, the tallies fold as documented, pairs form once per group, and the guard's decision rolls back
// a clear regression to the better ancestor, waits without evidence, and keeps equal adapters.
import { describe, expect, it } from "vitest";
import { emptyConfidence, lowerBound, observe, upperBound, type ConfidenceState } from "../src/loop/confidence-sequence.js";
import { foldOutcomes, emptyOutcomes, rewardSd, type FoldOptions, type ServedRollout } from "../src/loop/live-outcomes.js";
import { betAlphas, judgeLineage } from "../src/loop/guard.js";
import { parseConfig } from "../src/loop/config/index.js";
import { mersenne } from "pure-rand/generator/mersenne";
import { uniformFloat64 } from "pure-rand/distribution/uniformFloat64";

/** Seeded uniform draws in [0, 1) (Mersenne Twister, pure-rand): the same seed draws the same sequence. */
function rng(seed: number): () => number {
  const generator = mersenne(seed);
  return () => uniformFloat64(generator);
}

function normal(u: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - u())) * Math.cos(2 * Math.PI * u());
}

describe("confidence sequence - anytime coverage", () => {
  const cases: Array<{ name: string; mean: number; draw: (u: () => number) => number }> = [
    { name: "Bernoulli(0.3)", mean: 0.3, draw: (u) => (u() < 0.3 ? 1 : 0) },
    { name: "uniform on [0.4, 0.6]", mean: 0.5, draw: (u) => 0.4 + 0.2 * u() },
    { name: "a point mass at 0.9 and a tail at 0", mean: 0.9 * 0.95, draw: (u) => (u() < 0.95 ? 0.9 : 0) },
  ];
  for (const c of cases) {
    it(`${c.name}: the mean leaves [lower, upper] at some time on at most α of the paths`, () => {
      const alpha = 0.1;
      const paths = 400;
      const steps = 1500;
      let crossed = 0;
      const u = rng(7);
      for (let p = 0; p < paths; p++) {
        let s: ConfidenceState = emptyConfidence();
        for (let t = 0; t < steps; t++) {
          s = observe(s, c.draw(u), alpha / 2);
          if (lowerBound(s, alpha / 2) > c.mean || upperBound(s, alpha / 2) < c.mean) {
            crossed++;
            break;
          }
        }
      }
      // the bound is conservative: the rate is well below α; the binomial noise of 400 paths is ±0.015
      expect(crossed / paths).toBeLessThanOrEqual(alpha);
    });
  }

  it("narrows with the spread of the data, not its range", () => {
    const u = rng(3);
    let narrow = emptyConfidence();
    let wide = emptyConfidence();
    for (let t = 0; t < 1000; t++) {
      narrow = observe(narrow, 0.5 + 0.02 * normal(u), 0.025);
      wide = observe(wide, u() < 0.5 ? 1 : 0, 0.025);
    }
    const width = (s: ConfidenceState) => upperBound(s, 0.025) - lowerBound(s, 0.025);
    expect(width(narrow)).toBeLessThan(0.02);
    expect(width(wide)).toBeGreaterThan(0.1);
    // a Hoeffding sequence at the same n would be ~0.17 wide whatever the spread
    expect(width(narrow) * 5).toBeLessThan(width(wide));
  });

  it("refuses an observation outside [0, 1] (the caller scales and clips)", () => {
    expect(() => observe(emptyConfidence(), 1.5, 0.05)).toThrow(/must be in \[0, 1\], got 1.5/);
  });
});

const guardConfig = (over: Record<string, unknown> = {}) =>
  parseConfig({ guard: { enabled: true, rewardRange: { min: 0, max: 1 }, minRollouts: 16, minEffect: 0.05, baselines: 2, ...over } }).guard;

function foldOpts(config = guardConfig(), parents: Record<number, number | null> = { 0: null, 1: 0, 2: 1, 3: 2, 4: 3 }): FoldOptions {
  const bets = betAlphas(config);
  return {
    range: config.rewardRange, successThreshold: config.successThreshold, pairByGroup: config.pairByGroup, maxGroups: config.maxGroups,
    baselines: config.baselines, betAlpha: bets.single, pairBetAlpha: bets.pair, parentOf: (r) => parents[r] ?? null,
  };
}

/** `n` rollouts of `adapter` with rewards mean ± noise, clipped to [0, 1]. */
function served(adapter: number, n: number, mean: number, noise: number, u: () => number, group?: (i: number) => string): ServedRollout[] {
  return Array.from({ length: n }, (_, i) => ({ adapter, reward: Math.min(1, Math.max(0, mean + noise * normal(u))), group: group?.(i) }));
}

describe("live outcomes - the fold", () => {
  it("counts, mean, spread, min, max and successes per adapter; rewards outside the range are clipped and counted", () => {
    const config = guardConfig({ successThreshold: 0.5, rewardRange: { min: 0, max: 1 } });
    const rewards = [0.2, 0.9, 0.6, 1.4];
    const out = foldOutcomes(emptyOutcomes(), rewards.map((reward) => ({ adapter: 1, reward })), foldOpts(config));
    const a = out.adapters[0]!;
    expect(a).toMatchObject({ round: 1, parent: 0, count: 4, min: 0.2, max: 1.4, successes: 3, clipped: 1 });
    expect(a.mean).toBeCloseTo(0.775, 12);
    const m = 0.775;
    expect(rewardSd(a)).toBeCloseTo(Math.sqrt(rewards.reduce((s, r) => s + (r - m) ** 2, 0) / 3), 12);
    expect(a.cs?.t).toBe(4);
  });

  it("folding in two parts equals folding at once (a round at a time), and never touches its input", () => {
    const u = rng(1);
    const all = [...served(0, 30, 0.5, 0.2, u), ...served(1, 30, 0.6, 0.2, u)];
    const opts = foldOpts();
    const once = foldOutcomes(emptyOutcomes(), all, opts);
    const first = foldOutcomes(emptyOutcomes(), all.slice(0, 25), opts);
    const frozen = JSON.stringify(first);
    const twice = foldOutcomes(first, all.slice(25), opts);
    expect(JSON.stringify(first)).toBe(frozen);
    expect(twice).toEqual(once);
  });

  it("keeps the newest guard.maxGroups groups per adapter, and trims every adapter's to a limit lowered since at the next commit", () => {
    const groups = (n: number, from = 0) => Array.from({ length: n }, (_, i) => ({ adapter: 1, reward: 0.5, group: `scene-${from + i}` }));
    const wide = foldOutcomes(emptyOutcomes(), groups(10), foldOpts(guardConfig({ maxGroups: 8 })));
    expect(wide.adapters[0]!.groups).toHaveLength(8);
    const trimmed = foldOutcomes(wide, groups(1, 10), foldOpts(guardConfig({ maxGroups: 3 })));
    expect(trimmed.adapters[0]!.groups).toHaveLength(3);
    const newest = foldOutcomes(emptyOutcomes(), groups(11), foldOpts(guardConfig({ maxGroups: 3 })));
    expect(trimmed.adapters[0]!.groups.map((g) => g[0])).toEqual(newest.adapters[0]!.groups.map((g) => g[0]));
    // an adapter that serves nothing in the commit that lowers the limit is trimmed too
    const other = foldOutcomes(wide, [{ adapter: 2, reward: 0.5 }], foldOpts(guardConfig({ maxGroups: 3 })));
    expect(other.adapters.find((a) => a.round === 1)!.groups).toHaveLength(3);
  });

  it("a different reward range restarts the confidence sequences, not the tallies", () => {
    const u = rng(2);
    const first = foldOutcomes(emptyOutcomes(), served(0, 10, 0.5, 0.1, u), foldOpts());
    const moved = foldOutcomes(first, served(0, 5, 0.5, 0.1, u), { ...foldOpts(), range: { min: -1, max: 1 } });
    expect(moved.adapters[0]).toMatchObject({ count: 15 });
    expect(moved.adapters[0]?.cs?.t).toBe(5);
  });

  it("pairs each group an adapter shares with an ancestor once, at the first commit where both have served it", () => {
    const opts = foldOpts();
    const g = (i: number) => `scene-${i % 4}`;
    const r0 = foldOutcomes(emptyOutcomes(), Array.from({ length: 8 }, (_, i) => ({ adapter: 0, reward: 0.5, group: g(i) })), opts);
    const r1 = foldOutcomes(r0, Array.from({ length: 8 }, (_, i) => ({ adapter: 1, reward: 0.7, group: g(i) })), opts);
    const pairs = r1.adapters.find((a) => a.round === 1)?.pairs;
    expect(pairs).toEqual([{ baseline: 0, cs: expect.objectContaining({ t: 4 }) }]);
    // more rollouts of the same scenes change nothing already paired; a new scene pairs once both have it
    const again = foldOutcomes(r1, [{ adapter: 1, reward: 0.1, group: "scene-0" }, { adapter: 1, reward: 0.6, group: "scene-9" }, { adapter: 0, reward: 0.5, group: "scene-9" }], opts);
    expect(again.adapters.find((a) => a.round === 1)?.pairs[0]?.cs.t).toBe(5);
  });
});

describe("guard - the decision", () => {
  const fold = (rollouts: ServedRollout[], config = guardConfig()) => foldOutcomes(emptyOutcomes(), rollouts, foldOpts(config));
  const judge = (outcomes: ReturnType<typeof fold>, serving: number, config = guardConfig()) =>
    judgeLineage({ outcomes, serving, parentOf: (r) => (r === 0 ? null : r - 1), config });

  it("rolls a clear regression back to the better ancestor, with its evidence", () => {
    const u = rng(5);
    const outcomes = fold([...served(0, 64, 0.5, 0.1, u), ...served(1, 64, 0.7, 0.1, u), ...served(2, 64, 0.3, 0.1, u)]);
    const verdict = judge(outcomes, 2);
    expect(verdict).toMatchObject({ status: "regressed", candidate: 2, target: 1, evidence: { test: "unpaired", candidate: { round: 2, count: 64 }, baseline: { round: 1 } } });
    if (verdict.status === "regressed") expect(verdict.evidence.difference_upper).toBeLessThan(-0.05);
  });

  it("tests the parent of a just-published adapter (no rollouts yet)", () => {
    const u = rng(6);
    const outcomes = fold([...served(0, 64, 0.7, 0.1, u), ...served(1, 64, 0.3, 0.1, u)]);
    expect(judge(outcomes, 2)).toMatchObject({ status: "regressed", candidate: 1, target: 0 });
  });

  it("waits while there are too few rollouts, and keeps adapters that do as well", () => {
    const u = rng(8);
    expect(judge(fold([...served(0, 64, 0.7, 0.1, u), ...served(1, 10, 0.0, 0.0, u)]), 1)).toMatchObject({ status: "waiting", candidate: 0 });
    expect(judge(fold([...served(0, 300, 0.6, 0.1, u), ...served(1, 300, 0.6, 0.1, u)]), 1)).toMatchObject({ status: "ok", candidate: 1, baselines: [0] });
  });

  it("does not roll back a drop smaller than guard.minEffect, however much evidence", () => {
    const u = rng(9);
    const outcomes = fold([...served(0, 4000, 0.6, 0.05, u), ...served(1, 4000, 0.57, 0.05, u)]);
    expect(judge(outcomes, 1)).toMatchObject({ status: "ok" });
  });

  it("paired by group, sees a regression that scenario noise hides from the unpaired test", () => {
    const u = rng(10);
    // each scene has its own difficulty (spread 0.6): the per-adapter means are noisy, the per-scene differences not
    const scenes = 300;
    const difficulty = Array.from({ length: scenes }, () => 0.6 * (u() - 0.5));
    const rollouts = (adapter: number, mean: number) =>
      Array.from({ length: scenes }, (_, i) => ({ adapter, reward: Math.min(1, Math.max(0, mean + difficulty[i]! + 0.02 * normal(u))), group: `scene-${i}` }));
    const config = guardConfig({ baselines: 1 });
    const outcomes = fold([...rollouts(0, 0.5), ...rollouts(1, 0.38)], config);
    const verdict = judge(outcomes, 1, config);
    expect(verdict).toMatchObject({ status: "regressed", target: 0, evidence: { test: "paired", pairs: 256 } }); // guard.maxGroups: the newest 256 scenes are kept
    const unpaired = judge(fold([...rollouts(0, 0.5), ...rollouts(1, 0.38)], guardConfig({ baselines: 1, pairByGroup: false })), 1, guardConfig({ baselines: 1, pairByGroup: false }));
    expect(unpaired.status).toBe("ok");
  });

  it("is off without a reward range", () => {
    const config = parseConfig({}).guard;
    const outcomes = foldOutcomes(emptyOutcomes(), [{ adapter: 0, reward: 1 }], foldOpts(config));
    expect(outcomes.adapters[0]?.cs).toBeNull();
    expect(judgeLineage({ outcomes, serving: 0, parentOf: () => null, config })).toMatchObject({ status: "off" });
  });
});
