// The live-outcome guard over many simulated rounds (issue 23; a bench, not a test): the daemon's own fold
// (src/loop/live-outcomes.ts) and decision (src/loop/guard.ts), fed the simulator's rewards (src/tools/sim:
// sampleEpisode, adapterSkill) round after round, as the round runner does at each commit — a round's rollouts are
// served by the adapter served then; at its commit the guard either rolls back (the round's adapter is not
// published, the target is served) or the round's adapter is published and served next.
//   - without regression (skill flat, improving, or each adapter exactly guard.minEffect worse than its predecessor
//     with guard.baselines 1 — the boundary of the null hypothesis): false rollbacks per adapter tested, against
//     guard.alpha;
//   - with a scripted regression of several sizes at round 5, and a gradual drift: how many rollouts of the
//     regressed lineage are served before the rollback, and how often it is never rolled back within the run.
// Usage: npx tsx bench/guard-simulation.ts [--runs N] [--rounds N] [--rollouts N] [--seed N]
import { parseArgs } from "node:util";
import { parseConfig } from "../src/loop/config/index.js";
import { betAlphas, judgeLineage } from "../src/loop/guard.js";
import { emptyOutcomes, foldOutcomes } from "../src/loop/live-outcomes.js";
import { adapterSkill, type SkillModel } from "../src/tools/sim/regression.js";
import { sampleEpisode } from "../src/tools/sim/rollout.js";

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "200" },
    rounds: { type: "string", default: "20" },
    rollouts: { type: "string", default: "64" },
    seed: { type: "string", default: "1" },
  },
});
const RUNS = Number(values.runs);
const ROUNDS = Number(values.rounds);
const PER_ROUND = Number(values.rollouts);
const SEED = Number(values.seed);

interface Scenario {
  name: string;
  model: SkillModel;
  baselines: number;
  pairByGroup: boolean;
  /** the adapters from which on the lineage is regressed (for the delay); null = none */
  regressed: (round: number, parentOf: (r: number) => number | null) => boolean;
}

interface RunResult {
  tested: number;
  rollbacks: number;
  /** rollouts served by regressed adapters before the first rollback away from them (null: never) */
  delay: number | null;
  delayRounds: number | null;
}

function runOnce(s: Scenario, run: number): RunResult {
  const guard = parseConfig({ guard: { enabled: true, rewardRange: { min: 0, max: 1 }, alpha: 0.05, minEffect: 0.05, baselines: s.baselines, minRollouts: 16, pairByGroup: s.pairByGroup } }).guard;
  const bets = betAlphas(guard);
  const parents = new Map<number, number | null>([[0, null]]);
  const parentOf = (r: number) => parents.get(r) ?? null;
  let outcomes = emptyOutcomes();
  let serving = 0;
  let index = 0;
  const tested = new Set<number>();
  let rollbacks = 0;
  let regressedServed = 0;
  let regressedRounds = 0;
  let delay: number | null = null;
  let delayRounds: number | null = null;
  for (let round = 1; round <= ROUNDS; round++) {
    const q = adapterSkill(s.model, serving, parentOf);
    const rollouts = Array.from({ length: PER_ROUND }, () => {
      const episode = sampleEpisode({
        seed: SEED * 1_000_003 + run, groupSize: 4, maxSteps: 4, codeLength: 6, levels: 4,
        adapter: { round: serving, name: "" }, skill: { base: q, perRound: 0 }, runTag: "bench",
      }, index++);
      return { adapter: serving, reward: episode.reward, group: `g${index}` };
    });
    const bad = s.regressed(serving, parentOf);
    if (bad) {
      regressedServed += PER_ROUND;
      regressedRounds++;
    }
    outcomes = foldOutcomes(outcomes, rollouts, {
      range: guard.rewardRange, successThreshold: null, pairByGroup: guard.pairByGroup, maxGroups: guard.maxGroups,
      baselines: guard.baselines, betAlpha: bets.single, pairBetAlpha: bets.pair, parentOf,
    });
    const verdict = judgeLineage({ outcomes, serving, parentOf, config: guard });
    if (verdict.status === "ok" || verdict.status === "regressed") tested.add(verdict.candidate);
    if (verdict.status === "regressed") {
      rollbacks++;
      if (delay === null && s.regressed(verdict.candidate, parentOf)) {
        delay = regressedServed;
        delayRounds = regressedRounds;
      }
      serving = verdict.target;
    } else {
      parents.set(round, serving);
      serving = round;
    }
  }
  return { tested: tested.size, rollbacks, delay, delayRounds };
}

const flat = (over: Partial<SkillModel> = {}): SkillModel => ({ base: 0.5, perRound: 0, regressAt: null, regressBy: 0, driftFrom: null, driftPerRound: 0, ...over });
const descendsFrom = (k: number) => (round: number, parentOf: (r: number) => number | null) => {
  for (let r: number | null = round; r !== null; r = parentOf(r)) if (r === k) return true;
  return false;
};
const never = () => false;

const nulls: Scenario[] = [
  { name: "flat skill, pairing on (default)", model: flat(), baselines: 3, pairByGroup: true, regressed: never },
  { name: "flat skill, pairing off", model: flat(), baselines: 3, pairByGroup: false, regressed: never },
  { name: "improving +0.01/round", model: flat({ perRound: 0.01 }), baselines: 3, pairByGroup: false, regressed: never },
  // each adapter exactly minEffect worse than its parent, compared with its parent only: the null's boundary
  { name: "boundary: −0.05/round vs predecessor (baselines 1)", model: flat({ driftFrom: 0, driftPerRound: 0.05, base: 0.9 }), baselines: 1, pairByGroup: false, regressed: never },
];
const regressions: Scenario[] = [0.1, 0.2, 0.3].map((by) => ({
  name: `regression −${by} at round 5`, model: flat({ regressAt: 5, regressBy: by }), baselines: 3, pairByGroup: false, regressed: descendsFrom(5),
}));
regressions.push({
  name: "drift −0.03/round from round 5", model: flat({ driftFrom: 5, driftPerRound: 0.03 }), baselines: 3, pairByGroup: false,
  regressed: (round, parentOf) => {
    let depth = 0;
    for (let r: number | null = round; r !== null && r > 0; r = parentOf(r)) depth++;
    return depth > 5;
  },
});

const quantile = (xs: number[], p: number) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
};

console.log(`guard simulation: ${RUNS} runs x ${ROUNDS} rounds x ${PER_ROUND} rollouts/round; alpha 0.05, minEffect 0.05, rewardRange [0, 1], minRollouts 16; seed ${SEED}`);
console.log("\nwithout regression (every rollback is a false one):");
console.log("| scenario | adapters tested | false rollbacks | per adapter | runs with one |");
console.log("|---|---|---|---|---|");
for (const s of nulls) {
  const results = Array.from({ length: RUNS }, (_, run) => runOnce(s, run));
  const tested = results.reduce((n, r) => n + r.tested, 0);
  const rollbacks = results.reduce((n, r) => n + r.rollbacks, 0);
  const runs = results.filter((r) => r.rollbacks > 0).length;
  console.log(`| ${s.name} | ${tested} | ${rollbacks} | ${(rollbacks / tested).toFixed(4)} | ${(runs / RUNS).toFixed(3)} |`);
}
console.log("\nwith a regression (delay: rollouts served by the regressed lineage before the rollback):");
console.log("| scenario | rolled back within the run | delay median (rollouts) | p90 | rounds median |");
console.log("|---|---|---|---|---|");
for (const s of regressions) {
  const results = Array.from({ length: RUNS }, (_, run) => runOnce(s, run));
  const detected = results.filter((r) => r.delay !== null);
  const delays = detected.map((r) => r.delay as number);
  const rounds = detected.map((r) => r.delayRounds as number);
  console.log(`| ${s.name} | ${(detected.length / RUNS).toFixed(3)} | ${quantile(delays, 0.5)} | ${quantile(delays, 0.9)} | ${quantile(rounds, 0.5)} |`);
}
