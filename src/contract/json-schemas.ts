// The JSON Schema files of the wire (schema/*.schema.json), generated from the zod schemas so that rollout workers
// in other languages validate against exactly what the daemon checks. Written by scripts/gen-schemas.ts; a test
// fails when a committed file is stale.
import { z } from "zod";
import { RolloutRejected, AdapterPublished, ReplicaEvent, RoundEvent, RoundSummary, StatsEvent } from "./events.js";
import { TrainJob } from "./job.js";
import { LeaseRecord } from "./lease.js";
import { Manifest } from "./manifest.js";
import { AdapterRolledBack } from "./outcomes.js";
import { RolloutCompleted } from "./rollout.js";
import { RollbackRequest, RoundsQuery } from "./service-requests.js";
import { StateRecord } from "./state.js";
import { PpoStats } from "./stats.js";

/** File name under schema/ → the schema and its title. What a producer may send is the input side of each. */
export const WIRE_SCHEMAS: Record<string, { title: string; schema: z.ZodType }> = {
  "rollout-completed.schema.json": { title: "RolloutCompleted", schema: RolloutCompleted },
  "rollout-rejected.schema.json": { title: "RolloutRejected", schema: RolloutRejected },
  "round-event.schema.json": { title: "RoundEvent", schema: RoundEvent },
  "adapter-published.schema.json": { title: "AdapterPublished", schema: AdapterPublished },
  "adapter-rolled-back.schema.json": { title: "AdapterRolledBack", schema: AdapterRolledBack },
  "replica-event.schema.json": { title: "ReplicaEvent", schema: ReplicaEvent },
  "stats-event.schema.json": { title: "StatsEvent", schema: StatsEvent },
  "round-summary.schema.json": { title: "RoundSummary", schema: RoundSummary },
  "rounds-query.schema.json": { title: "RoundsQuery", schema: RoundsQuery },
  "rollback-request.schema.json": { title: "RollbackRequest", schema: RollbackRequest },
  "ppo-stats.schema.json": { title: "PpoStats", schema: PpoStats },
  "manifest.schema.json": { title: "Manifest", schema: Manifest },
  "state-record.schema.json": { title: "StateRecord", schema: StateRecord },
  "lease-record.schema.json": { title: "LeaseRecord", schema: LeaseRecord },
  "train-job.schema.json": { title: "TrainJob", schema: TrainJob },
};

/** One schema as JSON Schema (draft 2020-12); types zod cannot express in it (a number that may be NaN) are open. */
export function toJsonSchema(title: string, schema: z.ZodType): Record<string, unknown> {
  const json = z.toJSONSchema(schema, { io: "input", unrepresentable: "any", target: "draft-2020-12" }) as Record<string, unknown>;
  const { $schema, ...rest } = json;
  return { $schema, title, ...rest };
}
