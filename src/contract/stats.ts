// The trainer's statistics of a PPO round (stats.json, the seed's seven fields first): written by `rlloop train
// ppo` (or the seed), read by the daemon's health gate, carried by round and adapter events. Every number may be
// non-finite (a diverged round): stats-codec.ts writes and reads them so that NaN stays NaN.
import { z } from "zod";
import { statNumber } from "./primitives.js";

export const MismatchStats = z.object({
  k1: statNumber().meta({ description: "mean(-d), d = Σ old - vllm_logp per row: estimate of KL(sampler ‖ trainer)" }),
  k3: statNumber().meta({ description: "mean(exp(d) - d - 1): its low-variance k3 estimate" }),
  ess: statNumber().meta({ description: "(Σw)² / (n Σw²) of w = exp(d): effective sample size fraction, 1 when the two agree" }),
  tis_cap: statNumber().nullable().meta({ description: "the truncation cap in use, null when truncated IS is off" }),
  tis_clipped: statNumber().meta({ description: "fraction of rows whose weight exp(d) exceeded the cap (0 when off)" }),
}).meta({ description: "sampler/trainer mismatch on the sampled codes (--mismatch-stats or --tis-cap)" });
export type MismatchStats = z.infer<typeof MismatchStats>;

export const PpoStats = z.object({
  pg_loss: statNumber().meta({ description: "mean over the last epoch's forwards of the batch mean of -min(ratio·A, clip(ratio)·A)" }),
  kl: statNumber().meta({ description: "same mean of Σ_code k3(ref, lp)" }),
  clip_frac: statNumber().meta({ description: "same mean of the fraction of rows with |ratio - 1| > clip" }),
  logp_gap: statNumber().meta({ description: "mean over rows of Σ old - vllm_logp (trainer vs sampler log-prob of the code)" }),
  logp_gap_abs: statNumber().meta({ description: "mean of |Σ old - vllm_logp|" }),
  rows: statNumber().meta({ description: "rows trained" }),
  train_s: statNumber().meta({ description: "seconds from the first PPO forward to the adapter and optimizer state written" }),
  gpu_memory_bytes: statNumber().optional().meta({ description: "rank 0's peak allocated GPU memory over the job (accelerators only)" }),
  mismatch: MismatchStats.optional(),
}).meta({ description: "stats.json of a PPO round" });
export type PpoStats = z.infer<typeof PpoStats>;

/** The statistics the health gate and the monitors read, in order. */
export const GATED_STATS = ["pg_loss", "kl", "clip_frac", "logp_gap", "logp_gap_abs"] as const;

/** Beside stats.json: each row's Σ old − vllm_logp, in train.jsonl's order (written before stats.json). The daemon
 *  reads it for `gate.maxRolloutLogpGapAbs`; a trainer that does not write it (the seed) leaves that check undone. */
export const LOGP_GAPS_FILE = "logp_gaps.json";

export const LogpGaps = z.object({
  gaps: z.array(statNumber()).meta({ description: "per row of train.jsonl, in its order: Σ old − vllm_logp of the code" }),
}).meta({ description: "logp_gaps.json of a PPO round" });
export type LogpGaps = z.infer<typeof LogpGaps>;
