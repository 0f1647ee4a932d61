// Messages between the launcher (resident.ts) and a rank process (rank-process.ts), over execa's IPC channel
// (JSON serialisation). A rank answers `ready` once its model is loaded and its process group is up, then one
// `result` per `job`, in order; `stop` ends it.
import { TrainJob, type ModelSpec } from "../contract/index.js";
import { TrainInputError } from "./errors.js";
import type { TrainResult } from "./run-job.js";

/** What a rank process is started with (environment variable RLLOOP_RANK_SPEC, JSON). */
export interface RankSpec {
  model: ModelSpec;
  rank: number;
  world: number;
  masterAddr: string;
  masterPort: number;
}

export type ToRank = { type: "job"; id: number; job: TrainJob } | { type: "stop" };

export type FromRank =
  | { type: "ready"; rank: number }
  | { type: "result"; id: number; rank: number; ok: true; result: TrainResult }
  | { type: "result"; id: number; rank: number; ok: false; error: { name: string; message: string } }
  | { type: "failed"; rank: number; error: { name: string; message: string } }; // start-up failed

export const RANK_SPEC_ENV = "RLLOOP_RANK_SPEC";

/**
 * The job as the contract defines it. The launcher checks it before it sends (a job every rank would refuse alike
 * must not end the ranks), and each rank again on receipt: a job crosses the process boundary as JSON, and
 * launchers that are not typed (bench scripts) would otherwise have a field spelled the old way reach the trainer
 * as undefined and train with it (an undefined `tis_cap` made every loss NaN).
 */
export function checkedJob(value: unknown): TrainJob {
  const parsed = TrainJob.safeParse(value);
  if (parsed.success) return parsed.data;
  // unknown keys first: a misspelt field also shows as the missing one it was meant to be
  const issues = [...parsed.error.issues].sort((a, b) => Number(b.code === "unrecognized_keys") - Number(a.code === "unrecognized_keys"));
  const shown = issues.slice(0, 4).map((i) => `${i.path.join(".") || "job"}: ${i.message}`);
  const more = issues.length > shown.length ? ` (and ${issues.length - shown.length} more)` : "";
  throw new TrainInputError(`the job is not a TrainJob (docs/trainer.md): ${shown.join("; ")}${more}`);
}
