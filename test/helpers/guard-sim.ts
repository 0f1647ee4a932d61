// The simulated fleet of the guard's end-to-end tests (src/tools/sim): skill 0.85 flat, and every adapter descending
// from round 2 loses 0.6 of it; a round is ROUND rollouts of one serving adapter.
import { buildRollout, type RolloutOptions } from "../../src/tools/sim/rollout.js";
import type { RolloutCompletedInput } from "../../src/contract/index.js";
import { CODE_LENGTH, POLICY } from "./loop.js";

/** Rollouts per round: one round of the regressed adapter's rollouts is the detection budget this test states. */
export const ROUND = 96;

/** The simulated fleet: skill 0.85 flat, and every adapter descending from round 2 loses 0.6 of it. */
export function sim(adapter: number, runTag: string, parentOf?: (r: number) => number | null): RolloutOptions {
  return {
    policy: POLICY, seed: [...runTag].reduce((h, c) => h * 31 + c.charCodeAt(0), 23) % 100_000, groupSize: 4, maxSteps: 1, codeLength: CODE_LENGTH, levels: 2, frame: { width: 32, height: 24 },
    adapter: { round: adapter, name: `${POLICY}-r${adapter}` }, skill: { base: 0.85, perRound: 0, regressAt: 2, regressBy: 0.6 },
    memoryBits: 0, runTag, startMs: Date.parse("2026-12-03T00:00:00Z"), spacingMs: 1000, ...(parentOf ? { parentOf } : {}),
  };
}

export async function rollouts(adapter: number, tag: string, count: number, parentOf?: (r: number) => number | null): Promise<RolloutCompletedInput[]> {
  const opts = sim(adapter, tag, parentOf);
  return Promise.all(Array.from({ length: count }, (_, i) => buildRollout(opts, i, { kind: "inline" })));
}
