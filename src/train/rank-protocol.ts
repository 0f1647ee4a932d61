// Messages between the launcher (resident.ts) and a rank process (rank-process.ts), over execa's IPC channel
// (JSON serialisation). A rank answers `ready` once its model is loaded and its process group is up, then one
// `result` per `job`, in order; `stop` ends it.
import type { ModelSpec, TrainJob } from "../contract/index.js";
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
