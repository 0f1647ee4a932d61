// The KV buckets and the object store the daemon owns, opened and brought in line with the config (reconcile.ts):
//   - `rlloop` (state records and leases): history 8, per-message TTL allowed (the lease key expires by itself);
//   - `rlloop-ids` (the duplicate-id memory): history 1, TTL = intake.duplicateWindowS;
//   - `rlloop-adapters` (adapters, optimizer states and manifests of committed rounds).
// Each has `stream.replicas` replicas. nats.js creates a missing bucket but leaves an existing one as it is, so every
// open reconciles. KV reads go to the stream's leader, not a direct get that any replica may answer: a follower a
// little behind would show a standby the state record before the last commit, or a lease already taken over.
// The frames bucket (frames.objectBucket) is the workers', not the daemon's: it is only read.
import { JetStreamApiError, jetstreamManager, type StreamConfig } from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import { nanos, type NatsConnection } from "@nats-io/nats-core";
import type { ObjectStore } from "@nats-io/obj";
import type { Logger } from "pino";
import { ADAPTER_BUCKET, IDS_BUCKET, STATE_BUCKET } from "../contract/index.js";
import { ConfigError } from "./errors.js";
import { reconcileStream } from "./reconcile.js";
import { objectStores } from "./object-stores.js";

/** Revisions the state bucket keeps per key (the state record's last commits, a lease's last renewals). */
export const STATE_HISTORY = 8;
/** The server's default duplicate window, which it shortens to a bucket's TTL when that is shorter. */
const DEFAULT_DUPLICATE_WINDOW_MS = 120_000;

export interface BucketOptions {
  replicas: number;
  log?: Logger;
}

/** The state bucket `rlloop`. */
export async function openStateBucket(nc: NatsConnection, opts: BucketOptions): Promise<KV> {
  const what = `KV bucket ${STATE_BUCKET}`;
  const kv = await created(what, () => new Kvm(nc).create(STATE_BUCKET, { history: STATE_HISTORY, replicas: opts.replicas, allow_direct: false }));
  await reconcileStream(await jsmOf(nc), `KV_${STATE_BUCKET}`, {
    num_replicas: opts.replicas, max_msgs_per_subject: STATE_HISTORY, allow_msg_ttl: true,
  } as Partial<StreamConfig>, what, opts.log);
  return kv;
}

/** The duplicate-id memory `rlloop-ids`, whose TTL is the id window. */
export async function openIdsBucket(nc: NatsConnection, windowS: number, opts: BucketOptions): Promise<KV> {
  const ttlMs = windowS * 1000;
  const what = `KV bucket ${IDS_BUCKET}`;
  const kv = await created(what, () => new Kvm(nc).create(IDS_BUCKET, { history: 1, ttl: ttlMs, replicas: opts.replicas, allow_direct: false }));
  await reconcileStream(await jsmOf(nc), `KV_${IDS_BUCKET}`, {
    num_replicas: opts.replicas, max_msgs_per_subject: 1, max_age: nanos(ttlMs),
    duplicate_window: nanos(Math.min(ttlMs, DEFAULT_DUPLICATE_WINDOW_MS)),
  }, what, opts.log);
  return kv;
}

/** The object store `rlloop-adapters`. */
export async function openAdapterBucket(nc: NatsConnection, opts: BucketOptions): Promise<ObjectStore> {
  const what = `object store ${ADAPTER_BUCKET}`;
  const store = await created(what, () => objectStores(nc).create(ADAPTER_BUCKET, { replicas: opts.replicas }));
  await reconcileStream(await jsmOf(nc), `OBJ_${ADAPTER_BUCKET}`, { num_replicas: opts.replicas }, what, opts.log);
  return store;
}

function jsmOf(nc: NatsConnection) {
  return jetstreamManager(nc, { timeout: 10_000 });
}

/** A bucket the server refuses to create (replicas without a cluster) is a configuration error. */
async function created<T>(what: string, create: () => Promise<T>): Promise<T> {
  try {
    return await create();
  } catch (cause) {
    if (!(cause instanceof JetStreamApiError)) throw cause;
    throw new ConfigError(`${what}: the server refused to create it: ${cause.message} (JetStream error ${cause.code})`, { cause });
  }
}
