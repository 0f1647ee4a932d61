// The committed loop state (DESIGN.md data flow step 7): one record per policy in KV bucket `rlloop`, moved from
// round N-1 to N with a compare-and-set on its revision. The record is the single source of truth of which
// rounds are committed; everything on disk beyond it is redone after a restart.
import { Kvm, type KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/nats-core";
import { z } from "zod";
import { StateConflictError } from "./errors.js";
import { STATE_BUCKET, stateKey } from "./schema.js";

const AdapterState = z.object({
  /** round that produced it; 0 = the initial (SFT) adapter */
  round: z.number().int().min(0),
  path: z.string(),
  sha256: z.string().nullable(),
});

export const StateRecord = z.object({
  version: z.literal(1),
  policy: z.string(),
  /** last committed round (0 = none yet) */
  round: z.number().int().min(0),
  outcome: z.enum(["initial", "published", "rejected", "failed"]),
  /** the adapter the next round continues and rollouts should be served by */
  adapter: AdapterState,
  reference: z.object({ path: z.string(), sha256: z.string().nullable() }),
  /** highest stream sequence of the committed round's events */
  lastSeq: z.number().int().min(0),
  /** the consumer's ack floor seen at commit time: where a re-created consumer starts */
  ackFloor: z.number().int().min(0),
  /** sha256 of the adapters of the last rounds, to check a rollout's adapter.sha256 */
  recentAdapters: z.array(z.object({ round: z.number().int(), sha256: z.string().nullable() })),
  at: z.string(),
});
export type StateRecord = z.infer<typeof StateRecord>;

export interface VersionedState {
  record: StateRecord;
  /** KV revision; 0 = not stored yet (the record is the initial one) */
  revision: number;
}

/** How many adapters' sha256 the record remembers. */
export const RECENT_ADAPTERS = 16;

export class StateStore {
  private constructor(private readonly kv: KV, private readonly policy: string) {}

  static async open(nc: NatsConnection, policy: string, replicas: number): Promise<StateStore> {
    const kv = await new Kvm(nc).create(STATE_BUCKET, { history: 8, replicas });
    return new StateStore(kv, policy);
  }

  async read(): Promise<{ record: StateRecord; revision: number } | null> {
    const entry = await this.kv.get(stateKey(this.policy));
    if (!entry || entry.operation !== "PUT") return null;
    return { record: StateRecord.parse(entry.json()), revision: entry.revision };
  }

  /** CAS from `revision` (0 = the key must not exist). Returns the new revision. */
  async commit(next: StateRecord, revision: number): Promise<number> {
    const data = JSON.stringify(StateRecord.parse(next));
    try {
      return revision === 0 ? await this.kv.create(stateKey(this.policy), data) : await this.kv.update(stateKey(this.policy), data, revision);
    } catch (cause) {
      // the write may have landed before the reply was lost: then the stored record is ours
      const current = await this.read();
      if (current && JSON.stringify(current.record) === data) return current.revision;
      // nothing moved: the write did not land (a timeout, JetStream not ready after a server restart); the caller
      // retries. Only a record another writer moved is a conflict.
      if ((current?.revision ?? 0) === revision) throw cause;
      throw new StateConflictError(
        `state of policy ${this.policy} moved: expected revision ${revision}, found ${current?.revision ?? "none"} (round ${current?.record.round ?? "none"}); is another daemon running on this policy?`,
        { cause },
      );
    }
  }
}

export function withRecentAdapter(record: StateRecord, round: number, sha256: string | null): StateRecord["recentAdapters"] {
  return [...record.recentAdapters.filter((a) => a.round !== round), { round, sha256 }].slice(-RECENT_ADAPTERS);
}
