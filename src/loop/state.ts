// The committed loop state in KV (DESIGN.md data flow step 7; the record's schema is the contract's StateRecord):
// one record per policy in bucket `rlloop`, moved from round N-1 to N with a compare-and-set on its revision.
import { Kvm, type KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/nats-core";
import { parseStateRecord, STATE_BUCKET, stateKey, StateRecord } from "../contract/index.js";
import { STATE_HISTORY } from "./buckets.js";
import { StateConflictError } from "./errors.js";

export type { StateRecord } from "../contract/index.js";

export interface VersionedState {
  record: StateRecord;
  /** KV revision; 0 = not stored yet (the record is the initial one) */
  revision: number;
}

/** How many adapters' sha256 the record remembers. */
export const RECENT_ADAPTERS = 16;
/** How many of the latest rounds that published no adapter the record remembers (StateRecord.unpublished). */
export const UNPUBLISHED_KEPT = 256;

export class StateStore {
  private constructor(private readonly kv: KV, private readonly policy: string) {}

  /** Opens the bucket, creating it when missing (readers: status, tests); the daemon reconciles it (buckets.ts). */
  static async open(nc: NatsConnection, policy: string, replicas: number): Promise<StateStore> {
    const kv = await new Kvm(nc).create(STATE_BUCKET, { history: STATE_HISTORY, replicas, allow_direct: false });
    return new StateStore(kv, policy);
  }

  static of(kv: KV, policy: string): StateStore {
    return new StateStore(kv, policy);
  }

  async read(): Promise<VersionedState | null> {
    const entry = await this.kv.get(stateKey(this.policy));
    if (!entry || entry.operation !== "PUT") return null;
    return { record: parseStateRecord(entry.json()), revision: entry.revision };
  }

  /** Throws a StateConflictError where the record is no longer at `revision` (0: none): another daemon committed. */
  async assertAt(revision: number): Promise<void> {
    const current = await this.read();
    if ((current?.revision ?? 0) === revision) return;
    throw new StateConflictError(`state of policy ${this.policy} moved: expected revision ${revision}, found ${current?.revision ?? "none"} (round ${current?.record.round ?? "none"}); another daemon committed meanwhile`);
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

/** The record's unpublished rounds after committing `round` without an adapter. */
export function withUnpublished(record: StateRecord, round: number): StateRecord["unpublished"] {
  return [...record.unpublished.filter((r) => r !== round), round].slice(-UNPUBLISHED_KEPT);
}

/** The record's serving order once `round` is announced, with `seq` the rollout stream's last sequence at its commit
 *  (staleness.ts: rollouts at or below it are judged without it). */
export function withRecentAdapter(record: StateRecord, round: number, sha256: string | null, seq: number): StateRecord["recent_adapters"] {
  return [...record.recent_adapters.filter((a) => a.round !== round), { round, sha256, seq }].slice(-RECENT_ADAPTERS);
}
