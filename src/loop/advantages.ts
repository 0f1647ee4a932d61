// Advantage estimators (DESIGN.md data flow step 3). Pure functions: episodes in, one advantage per step out.
//   grpo:   per group, A = (R - mean) / (std + eps); std is the population std (divide by n). A rollout without a
//           group, or alone in its group, is normalised against the whole round instead ("falls back to the batch").
//   rloo:   per group of k >= 2, A_i = R_i - mean of the other k-1 rewards; singletons use the leave-one-out
//           mean of the whole round; a round of one rollout gets 0.
//   return: per step, the discounted return-to-go G_t = r_t + gamma G_{t+1}, with r_t = the step's reward (0 when
//           absent) — when no step of an episode carries a reward, the episode reward is the last step's — then
//           normalised over all steps of the round: (G - mean) / (std + eps).
// grpo and rloo give every step of an episode the episode's advantage.
import type { AdvantageConfig } from "./config/index.js";

export interface Episode {
  group: string | undefined;
  reward: number;
  /** per-step rewards, undefined where the step has none */
  stepRewards: readonly (number | undefined)[];
}

export function advantages(episodes: readonly Episode[], config: AdvantageConfig): number[][] {
  switch (config.estimator) {
    case "grpo": return perEpisode(episodes, grpo(episodes, config.eps));
    case "rloo": return perEpisode(episodes, rloo(episodes));
    case "return": return discountedReturns(episodes, config.gamma, config.eps);
  }
}

function perEpisode(episodes: readonly Episode[], values: number[]): number[][] {
  return episodes.map((e, i) => e.stepRewards.map(() => values[i] as number));
}

export function mean(xs: readonly number[]): number {
  return xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length;
}

/** Population standard deviation. */
export function std(xs: readonly number[]): number {
  const m = mean(xs);
  return Math.sqrt(mean(xs.map((x) => (x - m) ** 2)));
}

/** Indices of episodes by group; episodes without a group are not listed. */
function groupsOf(episodes: readonly Episode[]): Map<string, number[]> {
  const groups = new Map<string, number[]>();
  episodes.forEach((e, i) => {
    if (e.group === undefined) return;
    const members = groups.get(e.group) ?? [];
    members.push(i);
    groups.set(e.group, members);
  });
  return groups;
}

/** Members of each episode's group when it has at least two, else null (batch fallback). */
function peersOf(episodes: readonly Episode[]): (number[] | null)[] {
  const groups = groupsOf(episodes);
  return episodes.map((e) => {
    const members = e.group === undefined ? undefined : groups.get(e.group);
    return members && members.length >= 2 ? members : null;
  });
}

export function grpo(episodes: readonly Episode[], eps: number): number[] {
  const rewards = episodes.map((e) => e.reward);
  const batch = { mean: mean(rewards), std: std(rewards) };
  return peersOf(episodes).map((members, i) => {
    const group = members ? members.map((j) => rewards[j] as number) : null;
    const m = group ? mean(group) : batch.mean;
    const s = group ? std(group) : batch.std;
    return ((rewards[i] as number) - m) / (s + eps);
  });
}

export function rloo(episodes: readonly Episode[]): number[] {
  const rewards = episodes.map((e) => e.reward);
  const total = rewards.reduce((a, b) => a + b, 0);
  return peersOf(episodes).map((members, i) => {
    const r = rewards[i] as number;
    if (members) {
      const groupSum = members.reduce((acc, j) => acc + (rewards[j] as number), 0);
      return r - (groupSum - r) / (members.length - 1);
    }
    return rewards.length < 2 ? 0 : r - (total - r) / (rewards.length - 1);
  });
}

export function discountedReturns(episodes: readonly Episode[], gamma: number, eps: number): number[][] {
  const returns = episodes.map((e) => returnToGo(stepRewards(e), gamma));
  const flat = returns.flat();
  const m = mean(flat);
  const s = std(flat);
  return returns.map((g) => g.map((x) => (x - m) / (s + eps)));
}

function stepRewards(e: Episode): number[] {
  const any = e.stepRewards.some((r) => r !== undefined);
  if (any) return e.stepRewards.map((r) => r ?? 0);
  return e.stepRewards.map((_, t) => (t === e.stepRewards.length - 1 ? e.reward : 0));
}

export function returnToGo(rewards: readonly number[], gamma: number): number[] {
  const out = new Array<number>(rewards.length);
  let g = 0;
  for (let t = rewards.length - 1; t >= 0; t--) {
    g = (rewards[t] as number) + gamma * g;
    out[t] = g;
  }
  return out;
}
