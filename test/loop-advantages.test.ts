// Advantage estimators against hand-computed tables (tolerance 1e-6, which also covers eps = 1e-9 here).
import { describe, expect, it } from "vitest";
import { advantages, returnToGo, type Episode } from "../src/loop/advantages.js";

const EPS = 1e-9;
const close = (actual: number[][], expected: number[][]) => {
  expect(actual.length).toBe(expected.length);
  actual.forEach((row, i) => row.forEach((v, j) => expect(v).toBeCloseTo(expected[i]![j]!, 6)));
};

// group g: rewards 1, 2, 3 (2, 1, 1 steps); group solo: reward 4 alone; no group: reward 0
const EPISODES: Episode[] = [
  { group: "g", reward: 1, stepRewards: [undefined, undefined] },
  { group: "g", reward: 2, stepRewards: [undefined] },
  { group: "g", reward: 3, stepRewards: [undefined] },
  { group: "solo", reward: 4, stepRewards: [undefined] },
  { group: undefined, reward: 0, stepRewards: [undefined] },
];

describe("advantages - grpo", () => {
  it("normalises within groups and falls back to the batch for groups of one", () => {
    // g: mean 2, population std sqrt(2/3) = 0.816497 → ∓1.224745; batch [1,2,3,4,0]: mean 2, std sqrt(2)
    const s = 1.224744871391589;
    close(advantages(EPISODES, { estimator: "grpo", eps: EPS, gamma: 1 }), [[-s, -s], [0], [s], [Math.SQRT2], [-Math.SQRT2]]);
  });

  it("gives 0 to a group whose rewards are all equal (std 0 + eps)", () => {
    const same: Episode[] = [{ group: "a", reward: 5, stepRewards: [undefined] }, { group: "a", reward: 5, stepRewards: [undefined] }];
    close(advantages(same, { estimator: "grpo", eps: 1e-6, gamma: 1 }), [[0], [0]]);
  });
});

describe("advantages - rloo", () => {
  it("subtracts the leave-one-out mean within the group, of the batch for singletons", () => {
    // g: 1 - (2+3)/2 = -1.5, 2 - (1+3)/2 = 0, 3 - (1+2)/2 = 1.5; solo: 4 - (1+2+3+0)/4 = 2.5; none: 0 - 10/4 = -2.5
    close(advantages(EPISODES, { estimator: "rloo", eps: EPS, gamma: 1 }), [[-1.5, -1.5], [0], [1.5], [2.5], [-2.5]]);
  });

  it("gives 0 to a round of one rollout", () => {
    close(advantages([{ group: undefined, reward: 3, stepRewards: [undefined] }], { estimator: "rloo", eps: EPS, gamma: 1 }), [[0]]);
  });
});

describe("advantages - return", () => {
  it("discounts step rewards to go and normalises over the round's steps", () => {
    // gamma 0.5: [1, 0, 2] → G = [1 + 0.5 (0 + 0.5·2), 0 + 0.5·2, 2] = [1.5, 1, 2];
    // no step rewards, episode reward 4 on the last of 2 steps → [0, 4] → G = [2, 4];
    // all G [1.5, 1, 2, 2, 4]: mean 2.1, population std sqrt(1.04) = 1.019804
    const episodes: Episode[] = [
      { group: undefined, reward: 9, stepRewards: [1, undefined, 2] },
      { group: undefined, reward: 4, stepRewards: [undefined, undefined] },
    ];
    close(advantages(episodes, { estimator: "return", eps: EPS, gamma: 0.5 }), [
      [-0.588348405414552, -1.0786387432600122, -0.09805806756909201],
      [-0.09805806756909201, 1.8631032838127481],
    ]);
  });

  it("returnToGo with gamma 1 is the suffix sum", () => {
    expect(returnToGo([1, 2, 3], 1)).toEqual([6, 5, 3]);
  });
});
