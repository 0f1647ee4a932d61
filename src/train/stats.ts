// Typed statistics of the recipes (stats.json's record is the contract's PpoStats; valid.json's is Accuracy) and
// their arithmetic. Values are rounded to 4 decimals as the seed writes them.
import type { MismatchStats } from "../contract/index.js";

export type { MismatchStats, PpoStats } from "../contract/index.js";

/** valid.json / the accuracy log lines: teacher-forced argmax accuracy of the code digits. */
export interface Accuracy {
  digit_acc: number;
  code_acc: number;
  rows: number;
}

/** Per-forward means the PPO loop keeps for the statistics of an epoch. */
export interface PpoStepStats {
  pg: number;
  kl: number;
  clipFrac: number;
}

export const round4 = (x: number): number => Math.round(x * 1e4) / 1e4;

export function mean(values: ArrayLike<number>): number {
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += values[i]!;
  return sum / values.length;
}

/** Counts for accuracy over some rows; summed across ranks before `accuracyOf`. */
export interface AccuracyCounts {
  digits: number; // correct digits
  codes: number; // rows with every digit correct
  rows: number;
}

/** Adds one batch: `correct` is B×K (K = n + 1, the last column is <|im_end|>, not counted). */
export function countCorrect(counts: AccuracyCounts, correct: Uint8Array, K: number): AccuracyCounts {
  const rows = correct.length / K;
  let digits = 0;
  let codes = 0;
  for (let b = 0; b < rows; b++) {
    let right = 0;
    for (let k = 0; k < K - 1; k++) right += correct[b * K + k]!;
    digits += right;
    codes += right === K - 1 ? 1 : 0;
  }
  return { digits: counts.digits + digits, codes: counts.codes + codes, rows: counts.rows + rows };
}

export function accuracyOf(counts: AccuracyCounts, codeLength: number): Accuracy {
  return {
    digit_acc: round4(counts.digits / counts.rows / codeLength),
    code_acc: round4(counts.codes / counts.rows),
    rows: counts.rows,
  };
}

/** Mismatch statistics from each row's trainer (Σ old) and sampler (vllm_logp) log-probs of its code. */
export function mismatchStats(oldSums: Float64Array, vllm: Float64Array, cap: number | null): MismatchStats {
  const n = oldSums.length;
  let k1 = 0, k3 = 0, w1 = 0, w2 = 0, clipped = 0;
  for (let i = 0; i < n; i++) {
    const d = oldSums[i]! - vllm[i]!;
    const w = Math.exp(d);
    k1 += -d;
    k3 += w - d - 1;
    w1 += w;
    w2 += w * w;
    if (cap !== null && w > cap) clipped++;
  }
  return { k1: round4(k1 / n), k3: round4(k3 / n), ess: round4((w1 * w1) / (n * w2)), tis_cap: cap, tis_clipped: round4(clipped / n) };
}
