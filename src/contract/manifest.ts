// manifest.json of a round folder (DESIGN.md data flow step 4): what the round consumed and from what it trains.
// `status` moves assembled → training → committed. Version 1 (camelCase keys) is read and converted.
import { z } from "zod";
import { AdvantageEstimator, ManifestStatus, RemovedFromRound, RoundOutcome, RoundTrigger } from "./enums.js";
import { enumOf, isoTimestamp, nonNegativeInt, sha256Hex } from "./primitives.js";
import { GuardEvidence, LineageEntry, RollbackTrigger } from "./outcomes.js";
import { PpoStats } from "./stats.js";

const AdapterPointer = z.object({
  round: z.number().int().min(0),
  path: z.string().nullable(),
  sha256: sha256Hex().nullable(),
});

const ConsumedEvent = z.object({
  seq: nonNegativeInt().meta({ description: "stream sequence in RLLOOP_ROLLOUTS" }),
  id: z.string(),
  rows: nonNegativeInt(),
});

export const Manifest = z.object({
  version: z.literal(2),
  round: z.number().int().min(1),
  policy: z.string(),
  status: enumOf(ManifestStatus, "where the round is"),
  parent: AdapterPointer.meta({ description: "the adapter the round continues (with its optimizer state)" }),
  reference: z.object({ path: z.string().nullable(), sha256: sha256Hex().nullable() }).meta({ description: "the frozen reference adapter of the KL term" }),
  events: z.array(ConsumedEvent).meta({ description: "the rollouts the round trains on, by stream sequence" }),
  poisoned: z.array(ConsumedEvent.extend({ error: z.string(), reason: enumOf(RemovedFromRound, "why it was taken out").default("poison") })).default([])
    .meta({ description: "rollouts taken out of the round (isolated as poison, or a log-prob gap far from the rest's): rejected, not trained" }),
  rows: nonNegativeInt(),
  trigger: enumOf(RoundTrigger, "what closed it"),
  advantage: z.object({ estimator: enumOf(AdvantageEstimator, "the estimator"), eps: z.number(), gamma: z.number() }),
  config_hash: sha256Hex(),
  train_sha256: sha256Hex().meta({ description: "sha256 of train.jsonl" }),
  seed: nonNegativeInt(),
  attempts: nonNegativeInt().default(0).meta({ description: "training attempts started (a restart does not count a failure)" }),
  rollback: z.object({
    from: z.object({ round: nonNegativeInt(), sha256: sha256Hex().nullable() }).optional().meta({ description: "the adapter served when it was decided: it stands only while that one still is (absent: never stands)" }),
    target: LineageEntry.meta({ description: "the adapter rolled back to, which the round trains from" }),
    trigger: enumOf(RollbackTrigger, "who asked"),
    regressed: nonNegativeInt().nullable().meta({ description: "the adapter the guard found worse" }),
    reason: z.string(),
    evidence: GuardEvidence.nullable(),
  }).optional().meta({ description: "the live-outcome guard's rollback decided in this round's commit: the round trains again from its target and commits it as decided, even when resumed (it is not judged again), unless the served adapter moved since or the guard was turned off" }),
  outcome: enumOf(RoundOutcome, "the committed outcome").optional(),
  reason: z.string().optional(),
  stats: PpoStats.optional(),
  created_at: isoTimestamp(),
  updated_at: isoTimestamp(),
}).meta({ description: "manifest.json of a round folder" });
export type Manifest = z.infer<typeof Manifest>;
export type ManifestInput = z.input<typeof Manifest>;

const V1_KEYS: Record<string, string> = { configHash: "config_hash", trainSha256: "train_sha256", createdAt: "created_at", updatedAt: "updated_at" };

/** A parsed manifest.json of either version, as version 2. */
export function parseManifest(raw: unknown): Manifest {
  const value = raw as Record<string, unknown> | null;
  if (value?.version !== 1) return Manifest.parse(raw);
  const renamed = Object.fromEntries(Object.entries(value).map(([k, v]) => [V1_KEYS[k] ?? k, v]));
  const outcome = renamed.outcome === "failed" ? "empty" : renamed.outcome;
  return Manifest.parse({ ...renamed, version: 2, ...(outcome === undefined ? {} : { outcome }) });
}
