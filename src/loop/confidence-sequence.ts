// An anytime-valid confidence sequence for the mean of bounded observations: the predictable-plug-in
// empirical-Bernstein (PrPl-EB) confidence sequence of Waudby-Smith & Ramdas, "Estimating means of bounded random
// variables by betting", JRSS B 86(1), 2024, Theorem 2 and eq. (13)-(16) (the same construction as the `confseq`
// Python package's predmix_empbern_lower_cs). The live-outcome guard (guard.ts) checks it after every committed
// round, so its error rate must hold at every time at once, not at one planned sample size: that is what a
// confidence sequence gives and a fixed-n interval checked repeatedly does not.
//
// Assumptions (stated in docs/daemon.md "The live-outcome guard"): observations x_i lie in [0, 1] (the caller
// scales rewards from guard.rewardRange) and each has the same conditional mean μ given the ones before it (i.i.d.
// rollouts of one adapter satisfy it; so does any sequence whose mean does not drift). Then, for every α,
// P(∃t: μ < lower(t, α)) ≤ α and P(∃t: μ > upper(t, α)) ≤ α. Each bound comes from a nonnegative supermartingale
//   M_t(m) = exp( Σ λ_i (x_i − m) − Σ (x_i − μ̂_{i−1})² ψ(λ_i) ),  ψ(λ) = −log(1 − λ) − λ,
// (Fan, Grama & Liu 2015, Lemma 4.1, for λ_i ∈ [0, 1) chosen before x_i) and Ville's inequality, and both sides use
// the same running sums (the upper bound is the lower bound of 1 − x). The bets λ_i may be any predictable
// sequence; the paper's choice (eq. 16) targets widths of order σ·sqrt(log t / t), with σ the true spread — far
// tighter than a Hoeffding bound when the rewards vary much less than their range.
//
// Hand-written: no maintained JavaScript library implements confidence sequences; the arithmetic is a few sums,
// kept as plain numbers so they live in the KV state record and fold exactly once per committed rollout.

/** The running sums of one confidence sequence (all over the observations so far, in arrival order). */
export interface ConfidenceState {
  /** observations */
  t: number;
  /** Σ x_i */
  sum_x: number;
  /** Σ (x_i − μ̂_i)², μ̂_i the regularised mean after x_i: the bets' variance estimate */
  sum_sq_dev: number;
  /** Σ λ_i */
  sum_lambda: number;
  /** Σ λ_i x_i */
  sum_lambda_x: number;
  /** Σ (x_i − μ̂_{i−1})² ψ(λ_i): the empirical variance penalty */
  sum_v_psi: number;
}

/** The bets are capped below 1, ψ(λ) diverging at 1: the paper's c = 3/4. Rewards vary much less than their range,
 *  so the bets sit at the cap for the first hundreds of rollouts, where the bound is ≈ log(1/α) / (c·t): 3/4 rather
 *  than 1/2 makes it a quarter narrower there (bench/guard-simulation.ts). */
const MAX_BET = 0.75;
/** The regularised estimates start from one fake observation at mean 1/2, variance 1/4 (the paper's priors). */
const PRIOR_MEAN = 0.5;
const PRIOR_VARIANCE = 0.25;

export function emptyConfidence(): ConfidenceState {
  return { t: 0, sum_x: 0, sum_sq_dev: 0, sum_lambda: 0, sum_lambda_x: 0, sum_v_psi: 0 };
}

/** The regularised mean after t observations (μ̂_t). */
function meanEstimate(s: ConfidenceState): number {
  return (PRIOR_MEAN + s.sum_x) / (s.t + 1);
}

/** The bet for the next observation (λ_{t+1}, eq. 16), from what is known before it; `alpha` only tunes it. */
export function nextBet(s: ConfidenceState, alpha: number): number {
  const t = s.t + 1;
  const variance = (PRIOR_VARIANCE + s.sum_sq_dev) / (s.t + 1);
  return Math.min(MAX_BET, Math.sqrt((2 * Math.log(1 / alpha)) / (variance * t * Math.log(1 + t))));
}

/**
 * The state after one more observation `x` ∈ [0, 1]. `tuneAlpha` sets the bets (any fixed value keeps every bound
 * valid; the bounds' own α is chosen when they are read). A new object; the input is not modified.
 */
export function observe(s: ConfidenceState, x: number, tuneAlpha: number): ConfidenceState {
  if (!(x >= 0 && x <= 1)) throw new RangeError(`a confidence-sequence observation must be in [0, 1], got ${x}`);
  const lambda = nextBet(s, tuneAlpha);
  const before = meanEstimate(s);
  const psi = -Math.log(1 - lambda) - lambda;
  const next = {
    t: s.t + 1,
    sum_x: s.sum_x + x,
    sum_sq_dev: s.sum_sq_dev,
    sum_lambda: s.sum_lambda + lambda,
    sum_lambda_x: s.sum_lambda_x + lambda * x,
    sum_v_psi: s.sum_v_psi + (x - before) ** 2 * psi,
  };
  next.sum_sq_dev += (x - meanEstimate(next)) ** 2;
  return next;
}

/** A lower bound of the mean valid at every time at once with probability ≥ 1 − alpha (0 before any observation). */
export function lowerBound(s: ConfidenceState, alpha: number): number {
  if (s.sum_lambda === 0) return 0;
  const value = (s.sum_lambda_x - Math.log(1 / alpha) - s.sum_v_psi) / s.sum_lambda;
  return Math.min(1, Math.max(0, value));
}

/** The matching upper bound: the lower bound of 1 − x (same sums: (x − μ̂)² is symmetric). */
export function upperBound(s: ConfidenceState, alpha: number): number {
  if (s.sum_lambda === 0) return 1;
  const value = (s.sum_lambda_x + Math.log(1 / alpha) + s.sum_v_psi) / s.sum_lambda;
  return Math.min(1, Math.max(0, value));
}
