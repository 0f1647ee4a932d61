// The committed loop state (DESIGN.md data flow step 7): one record per policy in KV bucket `rlloop`, moved from
// round N-1 to N with a compare-and-set on its revision — the single source of truth of which rounds are
// committed. Version 1 (camelCase keys) is read and converted.
import { z } from "zod";
import { StateOutcome } from "./enums.js";
import { enumOf, isoTimestamp, nonNegativeInt, sha256Hex } from "./primitives.js";

/** A folder's files kept in the object store, so that a daemon on another host (a standby) continues from them. */
export const StoredFolder = z.object({
  bucket: z.string().meta({ description: "object store (rlloop-adapters)" }),
  prefix: z.string().meta({ description: "object names are <prefix>/<file name>" }),
  files: z.array(z.object({ name: z.string(), sha256: sha256Hex(), size: nonNegativeInt() })),
}).meta({ description: "the folder's files in the object store" });
export type StoredFolder = z.infer<typeof StoredFolder>;

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
  recent_adapters: z.array(z.object({ round: nonNegativeInt(), sha256: sha256Hex().nullable() }))
    .meta({ description: "sha256 of the adapters of the last rounds, to check a rollout's adapter.sha256" }),
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
