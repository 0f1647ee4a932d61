// Builds one synthetic RolloutCompleted: a member of a group of rollouts of the same scenario, an episode of
// 1..maxSteps decisions, each with a rendered frame, the target's name, a sampled code, the sampler's log-prob of
// that code and a reward that grows with the number of digits matching the scenario's right code.
//
// The simulated sampler puts probability q on the right digit and (1 - q) / (levels - 1) on each other digit, per
// dimension, independently; q rises with the adapter's round so later adapters look better trained. vllm_logp is
// the exact log-probability of the sampled code under that sampler (sum of per-digit log-probs), so it is finite
// and <= 0 by construction.
import type { RolloutCompletedInput } from "../../contract/index.js";
import { renderFrame, type FrameSize } from "./frame.js";
import { integer, normal, uniform } from "./random.js";
import { adapterSkill } from "./regression.js";
import { scenario, sceneAt, targetCode } from "./scenario.js";

export interface RolloutOptions {
  policy: string;
  seed: number;
  /** rollouts per scenario (one group) */
  groupSize: number;
  /** episodes have 1..maxSteps steps */
  maxSteps: number;
  /** digits in a code (the policy's fixed length) */
  codeLength: number;
  /** values a digit takes: 0..levels-1 (at most 10) */
  levels: number;
  frame: FrameSize;
  /** the adapter that "served" the rollouts */
  adapter: { round: number; name: string };
  /** probability of the right digit at round 0, and its gain per adapter round (capped at 0.95); optionally a
   *  scripted regression or a drift (regression.ts) */
  skill: { base: number; perRound: number; regressAt?: number | null; regressBy?: number; driftFrom?: number | null; driftPerRound?: number };
  /** the lineage of the serving adapters (a rollback's branch), by default each round continues the one before */
  parentOf?: (round: number) => number | null;
  /** include two memory bit strings of this length per step; 0 = no memory */
  memoryBits: number;
  /** prefix of ids and groups, so separate runs with one seed can coexist on a stream */
  runTag: string;
  /** created_at of rollout 0 (ms since epoch) and the spacing between rollouts */
  startMs: number;
  spacingMs: number;
}

/** How a frame is carried in the event: inline base64, or written by `store` and referred to by path. */
export type FrameSink = { kind: "inline" } | { kind: "path"; store: (relative: string, png: Buffer) => Promise<string> };

export interface SampledStep {
  code: string;
  vllm_logp: number;
  matches: number;
}

export function skillAt(opts: Pick<RolloutOptions, "skill" | "parentOf">, round: number): number {
  const s = opts.skill;
  return adapterSkill({
    base: s.base, perRound: s.perRound, regressAt: s.regressAt ?? null, regressBy: s.regressBy ?? 0,
    driftFrom: s.driftFrom ?? null, driftPerRound: s.driftPerRound ?? 0,
  }, round, opts.parentOf);
}

/** Samples a code around the right one; returns it with its exact log-probability under the sampler. */
export function sampleCode(right: string, q: number, levels: number, seed: number, key: (string | number)[]): SampledStep {
  const wrongLogp = Math.log((1 - q) / (levels - 1));
  let code = "";
  let logp = 0;
  let matches = 0;
  for (let i = 0; i < right.length; i++) {
    const rightDigit = Number(right[i]);
    if (uniform(seed, ...key, "digit", i) < q) {
      code += String(rightDigit);
      logp += Math.log(q);
      matches += 1;
    } else {
      // one of the other levels-1 digits, uniformly
      const other = integer(levels - 1, seed, ...key, "other", i);
      code += String(other >= rightDigit ? other + 1 : other);
      logp += wrongLogp;
    }
  }
  return { code, vllm_logp: logp, matches };
}

export function rolloutId(opts: Pick<RolloutOptions, "runTag">, index: number, groupSize: number): { id: string; group: string } {
  const scenarioIndex = Math.floor(index / groupSize);
  const member = index % groupSize;
  const group = `${opts.runTag}-g${String(scenarioIndex).padStart(6, "0")}`;
  return { id: `${group}-m${member}`, group };
}

/** Rollout number `index` of the simulation (scenario = index / groupSize, member = index % groupSize). */
export async function buildRollout(opts: RolloutOptions, index: number, sink: FrameSink): Promise<RolloutCompletedInput> {
  const { id, group } = rolloutId(opts, index, opts.groupSize);
  const sc = scenario(opts.seed, Math.floor(index / opts.groupSize));
  const episode = sampleEpisode(opts, index);
  const steps: RolloutCompletedInput["steps"] = [];
  for (const [t, sampled] of episode.steps.entries()) {
    const png = await renderFrame(sceneAt(sc, t), opts.frame);
    steps.push({
      image: await frameRef(sink, `${opts.policy}/${group}/${id}-s${t}.png`, png),
      name: sc.target.name,
      code: sampled.code,
      vllm_logp: sampled.vllm_logp,
      ...(opts.memoryBits > 0 ? { memory: memory(opts, ["rollout", index, "step", t]) } : {}),
      reward: sampled.reward,
    });
  }
  return {
    id,
    policy: opts.policy,
    adapter: { round: opts.adapter.round, name: opts.adapter.name },
    group,
    reward: episode.reward,
    steps,
    created_at: new Date(opts.startMs + index * opts.spacingMs).toISOString(),
  };
}

/** The decisions and rewards of rollout `index` without its frames (what bench/guard-simulation.ts needs). */
export function sampleEpisode(opts: Omit<RolloutOptions, "frame" | "memoryBits" | "startMs" | "spacingMs" | "policy">, index: number): { reward: number; steps: Array<SampledStep & { reward: number }> } {
  const sc = scenario(opts.seed, Math.floor(index / opts.groupSize));
  const key = ["rollout", index];
  const stepCount = 1 + integer(opts.maxSteps, opts.seed, ...key, "steps");
  const q = skillAt(opts, opts.adapter.round);
  const steps: Array<SampledStep & { reward: number }> = [];
  let rewardSum = 0;
  for (let t = 0; t < stepCount; t++) {
    const stepKey = [...key, "step", t];
    const sampled = sampleCode(targetCode(sc, t, opts.codeLength, opts.levels), q, opts.levels, opts.seed, stepKey);
    const reward = stepReward(sampled.matches, opts.codeLength, opts.seed, stepKey);
    rewardSum += reward;
    steps.push({ ...sampled, reward });
  }
  return { reward: rewardSum / stepCount, steps };
}

/** Fraction of right digits plus a little noise (a real environment is never exact), rounded for readability. */
function stepReward(matches: number, codeLength: number, seed: number, key: (string | number)[]): number {
  const value = matches / codeLength + 0.05 * normal(seed, ...key, "reward");
  return Math.round(value * 1e4) / 1e4;
}

function memory(opts: RolloutOptions, key: (string | number)[]): [string, string] {
  const bits = (which: number) =>
    Array.from({ length: opts.memoryBits }, (_, i) => (uniform(opts.seed, ...key, "memory", which, i) < 0.5 ? "0" : "1")).join("");
  return [bits(0), bits(1)];
}

async function frameRef(sink: FrameSink, relative: string, png: Buffer) {
  if (sink.kind === "inline") return { png_base64: png.toString("base64") };
  return { path: await sink.store(relative, png) };
}

