// The duplicate-id memory: every rollout id a committed round consumed, kept in KV bucket `rlloop-ids` for
// intake.duplicateWindowS (the bucket's TTL), so it survives restarts and does not depend on how many rounds passed.
// A rollout whose id is there under another stream sequence is a duplicate; under the same sequence and a committed
// round it is a committed rollout redelivered, acked as applied. Ids are recorded just before their round's commit,
// so a round that did not commit may have recorded them (a standby taking over without the dead daemon's round
// folders sees its messages again): the value names the round to tell, and the round itself (its manifest) whether
// it trained that sequence — its successor may have committed a round of that number without it. Keys are
// `<policy>.<sha256(id)>` (ids may hold characters KV keys may not); values "<seq> <round>" (a bare "<seq>" from
// before the round was kept). Cost: one KV read per judged rollout, one write per consumed rollout, ~200 bytes of
// storage per id over the window.
import { createHash } from "node:crypto";
import { Kvm, type KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/nats-core";
import { IDS_BUCKET } from "../contract/index.js";

/** Where an id was consumed; round null when it was recorded without one. */
export interface Consumed {
  seq: number;
  round: number | null;
}

/** Puts in flight at once when a round's ids are recorded. */
const PUT_BATCH = 64;

export class ConsumedIds {
  private constructor(private readonly kv: KV, private readonly policy: string) {}

  static async open(nc: NatsConnection, policy: string, windowS: number, replicas: number): Promise<ConsumedIds> {
    const kv = await new Kvm(nc).create(IDS_BUCKET, { history: 1, ttl: windowS * 1000, replicas });
    return new ConsumedIds(kv, policy);
  }

  /** Over a bucket the daemon opened and reconciled (buckets.ts). */
  static of(kv: KV, policy: string): ConsumedIds {
    return new ConsumedIds(kv, policy);
  }

  /** The stream sequence and round the id was consumed under within the window, or null. */
  async lookup(id: string): Promise<Consumed | null> {
    const entry = await this.kv.get(this.#key(id));
    if (!entry || entry.operation !== "PUT") return null;
    const [seq, round] = entry.string().split(" ").map(Number);
    if (!Number.isInteger(seq)) return null;
    return { seq: seq as number, round: Number.isInteger(round) ? (round as number) : null };
  }

  /** Records a round's events (idempotent: a round re-run after a crash writes the same values). */
  async record(round: number, events: ReadonlyArray<{ seq: number; id: string }>): Promise<void> {
    for (let i = 0; i < events.length; i += PUT_BATCH) {
      await Promise.all(events.slice(i, i + PUT_BATCH).map((e) => this.kv.put(this.#key(e.id), `${e.seq} ${round}`)));
    }
  }

  #key(id: string): string {
    return `${this.policy}.${createHash("sha256").update(id).digest("hex")}`;
  }
}
