// Running mean and variance of the episode rewards of one serving adapter (Welford's update, numerically stable
// over any number of rollouts without keeping them), and its 95% interval of the mean.
import type { RewardPoint } from "./model.js";

/** z of a two-sided 95% interval: the normal approximation, fair from a few dozen rollouts per adapter on. */
const Z95 = 1.96;

export class RewardTally {
  #count = 0;
  #mean = 0;
  /** sum of squared deviations from the running mean */
  #m2 = 0;

  add(reward: number): void {
    this.#count++;
    const delta = reward - this.#mean;
    this.#mean += delta / this.#count;
    this.#m2 += delta * (reward - this.#mean);
  }

  point(adapterRound: number): RewardPoint {
    if (this.#count < 2) return { adapterRound, count: this.#count, mean: this.#mean, sd: null, lo: null, hi: null };
    const sd = Math.sqrt(this.#m2 / (this.#count - 1));
    const half = (Z95 * sd) / Math.sqrt(this.#count);
    return { adapterRound, count: this.#count, mean: this.#mean, sd, lo: this.#mean - half, hi: this.#mean + half };
  }
}
