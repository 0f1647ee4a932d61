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

/** Whether an object's data is in its store: all of its chunks (missingChunks). */
export async function chunksPresent(jsm: JetStreamManager, info: ObjectInfo): Promise<boolean> {
  return (await missingChunks(jsm, info)) === 0;
}

/**
 * How many of an object's chunks are not in its store. The client keeps an object's chunks in stream OBJ_<bucket>
 * under $O.<bucket>.C.<nuid> (NATS ADR-20), and its metadata can outlive them: a put that fails purges the chunks it
 * had put, even when its metadata had landed (its reply lost), and a bucket's age limit (max_age; a stream made
 * by hand with discard-old limits too) removes the oldest messages, chunks before the metadata written after them.
 * Counted by the server's per-subject state, one request (a literal subject: callers that take the nuid from
 * metadata others wrote check it is a plain token, frame-objects.ts).
 */
export async function missingChunks(jsm: JetStreamManager, info: ObjectInfo): Promise<number> {
  if (info.chunks === 0) return 0;
  const subject = chunkSubject(info);
  const stream = await jsm.streams.info(`OBJ_${info.bucket}`, { subjects_filter: subject });
  return Math.max(0, info.chunks - (stream.state.subjects?.[subject] ?? 0));
}

/** Purges an object's chunks (those of metadata that no longer names them). */
export async function purgeChunks(jsm: JetStreamManager, info: ObjectInfo): Promise<void> {
  await jsm.streams.purge(`OBJ_${info.bucket}`, { filter: chunkSubject(info) });
}

const chunkSubject = (info: ObjectInfo) => `$O.${info.bucket}.C.${info.nuid}`;
