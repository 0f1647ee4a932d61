// The request bodies of the daemon's micro service (rlloop.<policy>.svc.*): what `rlloop status`, `rlloop rollback`,
// the web dashboard or a monitor of one's own sends. `status` takes no body; the answers are StatsEvent,
// RoundSummary[] and AdapterRolledBack.
import { z } from "zod";
import { nonNegativeInt } from "./primitives.js";

export const ROUNDS_QUERY_DEFAULT = 20;
export const ROUNDS_QUERY_MAX = 1000;
export const ROLLBACK_REASON_MAX = 500;

export const RoundsQuery = z.object({
  limit: z.number().int().min(1).max(ROUNDS_QUERY_MAX).default(ROUNDS_QUERY_DEFAULT)
    .meta({ description: "how many of the newest rounds to summarise, newest first" }),
}).meta({ description: "request of rlloop.<policy>.svc.rounds (an empty body: the defaults)" });
export type RoundsQuery = z.infer<typeof RoundsQuery>;

export const RollbackRequest = z.object({
  to_round: nonNegativeInt().meta({ description: "the round whose adapter to serve and continue again" }),
  reason: z.string().trim().min(1).max(ROLLBACK_REASON_MAX).optional()
    .meta({ description: "why, for the announcement and the log (default: asked by an operator)" }),
}).meta({ description: "request of rlloop.<policy>.svc.rollback; answered with the AdapterRolledBack it published" });
export type RollbackRequest = z.infer<typeof RollbackRequest>;
