// What a recipe knows about the ranks it runs on: its rank, the world size and the process group that sums
// across ranks (none on a single rank, where every collective is the identity).
import type { Logger } from "pino";
import type { ProcessGroup } from "../native.js";

export interface RankContext {
  rank: number;
  world: number;
  group: ProcessGroup | null;
  log: Logger;
}

/** Element-wise sum over ranks. Used to gather disjoint per-rank slices (each rank writes only its own rows). */
export async function sumOverRanks(ctx: RankContext, data: Float32Array): Promise<Float32Array> {
  if (ctx.group === null) return data;
  return ctx.group.allReduce(data, "sum");
}

export async function meanOverRanks(ctx: RankContext, data: Float32Array): Promise<Float32Array> {
  if (ctx.group === null) return data;
  return ctx.group.allReduce(data, "mean");
}
