// The workers' object store of `{object}` frames (frames.objectBucket), opened once and lazily. nats.js reports a
// missing object store as a bare Error("object store not found"); this opener asks for the bucket's stream first, so
// a missing bucket surfaces as JetStream's StreamNotFound code (frames.ts rejects on it, by code) and anything else
// (a disconnect) as itself. A failed open is tried again next time.
import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import type { ObjectStore } from "@nats-io/obj";
import { loadOnce } from "../load-once.js";
import { objectStores } from "./object-stores.js";

export function frameObjectOpener(nc: NatsConnection, bucket: string): () => Promise<ObjectStore> {
  return loadOnce(async () => {
    await (await jetstreamManager(nc, { timeout: 10_000 })).streams.info(`OBJ_${bucket}`);
    return objectStores(nc).open(bucket, false);
  });
}
