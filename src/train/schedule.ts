// The seed's SFT learning rate: linear warm-up over 10 updates, then cosine to zero over the run.
// PPO uses a constant --lr (the seed sets it once, also after loading a previous round's optimizer state).

export const WARMUP_UPDATES = 10;

/** LR of update u (0-based) of `total`: lr · min(1, (u+1)/10) · ½(1 + cos(π u / total)). */
export function sftLearningRate(lr: number, update: number, total: number): number {
  return lr * Math.min(1, (update + 1) / WARMUP_UPDATES) * 0.5 * (1 + Math.cos((Math.PI * update) / total));
}
