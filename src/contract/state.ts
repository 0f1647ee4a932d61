// The committed loop state (DESIGN.md data flow step 7): one record per policy in KV bucket `rlloop`, moved from
// round N-1 to N with a compare-and-set on its revision — the single source of truth of which rounds are
// committed. Version 1 (camelCase keys) is read and converted.
import { z } from "zod";
import { StateOutcome } from "./enums.js";
import { LineageEntry, LiveOutcomes, RollbackRecord } from "./outcomes.js";
import { enumOf, isoTimestamp, nonNegativeInt, sha256Hex } from "./primitives.js";
import { StoredFolder } from "./stored-folder.js";

export { StoredFolder } from "./stored-folder.js";

const AdapterState = z.object({
  round: nonNegativeInt().meta({ description: "round that produced it; 0 = the initial (SFT) adapter" }),
  path: z.string().meta({ description: "its folder on the disk of the daemon that committed the record" }),
  sha256: sha256Hex().nullable(),
  objects: StoredFolder.optional().meta({ description: "the adapter and the optimizer state that continues it (optimizer.safetensors and optimizer.json), stored before the commit" }),
});

export const StateRecord = z.object({
  version: z.literal(2),
  policy: z.string(),
  round: nonNegativeInt().meta({ description: "last committed round (0 = none yet)" }),
  outcome: enumOf(StateOutcome, "that round's outcome"),
  adapter: AdapterState.meta({ description: "the adapter the next round continues and rollouts should be served by" }),
  reference: z.object({ path: z.string(), sha256: sha256Hex().nullable(), objects: StoredFolder.optional() }),
  last_seq: nonNegativeInt().meta({ description: "highest stream sequence of the committed rounds' events" }),
  ack_floor: nonNegativeInt().meta({ description: "the consumer's ack floor seen at commit time: where a re-created consumer starts" }),
  recent_adapters: z.array(z.object({
    round: nonNegativeInt(),
    sha256: sha256Hex().nullable(),
    seq: nonNegativeInt().optional().meta({ description: "the rollout stream's last sequence when it was committed: a rollout at or below it reached the stream before this adapter was announced, and is judged without it (absent: before every rollout)" }),
  }))
    .meta({ description: "the adapters served last, in the order they were announced (published, or rolled back to), the one served now last: a rollout's staleness is how many came after its adapter and before the rollout reached the stream; their sha256 checks a rollout's adapter.sha256" }),
  unpublished: z.array(nonNegativeInt()).default([])
    .meta({ description: "the latest rounds (up to 256) committed without publishing an adapter (rejected by the gate, empty, or rolled back in their own commit): a rollout naming one of them is unknown_adapter" }),
  // issue 23, the live-outcome guard: defaults so that records written before it read as "nothing observed yet"
  outcomes: LiveOutcomes.default({ range: null, adapters: [] }).meta({ description: "live outcomes per serving adapter (rewards of the committed rollouts each served)" }),
  lineage: z.array(LineageEntry).default([]).meta({ description: "the recent published adapters, each with its parent and continuation objects: what a rollback can go back to" }),
  rollback: RollbackRecord.nullable().default(null).meta({ description: "the last rollback (announced once, by its seq)" }),
  at: isoTimestamp(),
}).meta({ description: "the state record in KV bucket rlloop, key <policy>" });
export type StateRecord = z.infer<typeof StateRecord>;

const V1_KEYS: Record<string, string> = { lastSeq: "last_seq", ackFloor: "ack_floor", recentAdapters: "recent_adapters" };

/** A stored state record of either version, as version 2. */
export function parseStateRecord(raw: unknown): StateRecord {
  const value = raw as Record<string, unknown> | null;
  if (value?.version !== 1) return StateRecord.parse(raw);
  const renamed = Object.fromEntries(Object.entries(value).map(([k, v]) => [V1_KEYS[k] ?? k, v]));
  return StateRecord.parse({ ...renamed, version: 2, outcome: renamed.outcome === "failed" ? "empty" : renamed.outcome });
}
