// Typed statistics of the recipes and the files they are written to (stats.json, valid.json). Values are rounded
// to 4 decimals as the seed writes them.

/** stats.json of a PPO round; the first seven fields are the seed's. */
export interface PpoStats {
  pg_loss: number; // mean over the last epoch's forwards of the batch mean of −min(ratio·A, clip(ratio)·A)
  kl: number; // same mean of Σ_code k3(ref, lp)
  clip_frac: number; // same mean of the fraction of rows with |ratio − 1| > clip
  logp_gap: number; // mean over rows of Σ old − vllm_logp (trainer vs sampler log-prob of the code)
  logp_gap_abs: number; // mean of |Σ old − vllm_logp|
  rows: number;
  train_s: number; // seconds from the first PPO forward to the adapter and optimizer state written (the seed's span)
  gpu_memory_bytes?: number; // rank 0's peak allocated GPU memory over the job (accelerators only; not the seed's)
  mismatch?: MismatchStats; // only with --mismatch-stats or --tis-cap
}

/** Sampler/trainer mismatch on the sampled codes (sequence level; d = Σ old − vllm_logp per row). */
export interface MismatchStats {
  k1: number; // mean(−d): estimate of KL(sampler ‖ trainer)
  k3: number; // mean(exp(d) − d − 1): its low-variance k3 estimate
  ess: number; // (Σw)² / (n Σw²) of w = exp(d): effective sample size fraction, 1 when the two agree
  tis_cap: number | null; // the truncation cap in use, null when truncated IS is off
  tis_clipped: number; // fraction of rows whose weight exp(d) exceeded the cap (0 when off)
}

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
