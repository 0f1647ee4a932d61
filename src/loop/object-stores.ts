// Every NATS object store the daemon opens comes from here. The client verifies each object's SHA-256 as it puts or
// gets it, with a pure-JS hash by default (browser-safe); on Node the library's documented switch to node:crypto
// makes that native, which is most of the cost of moving a 9B adapter's continuation (~0.5 GB): bench/object-upload.ts.
import type { JetStreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import { Objm, setSha256Backend, type ObjectInfo } from "@nats-io/obj";

export function objectStores(nc: NatsConnection): Objm {
  setSha256Backend("native"); // process-wide and idempotent; before the first object store operation
  return new Objm(nc);
}

/** Whether an object's data is in its store. The client keeps an object's chunks in stream OBJ_<bucket> under
 *  $O.<bucket>.C.<nuid> (NATS ADR-20), and a put that fails purges the chunks it had put, even when its metadata had
 *  landed (its reply lost): that metadata then names a digest over no data. */
export async function chunksPresent(jsm: JetStreamManager, info: ObjectInfo): Promise<boolean> {
  if (info.size === 0) return true;
  return (await jsm.streams.getMessage(`OBJ_${info.bucket}`, { last_by_subj: chunkSubject(info) })) !== null;
}

/** Purges an object's chunks (those of metadata that no longer names them). */
export async function purgeChunks(jsm: JetStreamManager, info: ObjectInfo): Promise<void> {
  await jsm.streams.purge(`OBJ_${info.bucket}`, { filter: chunkSubject(info) });
}

const chunkSubject = (info: ObjectInfo) => `$O.${info.bucket}.C.${info.nuid}`;
