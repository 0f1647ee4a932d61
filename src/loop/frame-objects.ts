// `{object}` frames: the workers' object store of frames (frames.objectBucket), opened once and lazily, and the read of
// one frame from it. nats.js reports a missing object store as a bare Error("object store not found"); the opener
// asks for the bucket's stream first, so a missing bucket surfaces as JetStream's StreamNotFound code and anything
// else (a disconnect) as itself. A failed open is tried again next time.
//
// What the read refuses, and why: an object not there, larger than frames.maxBytes, whose chunks do not hash to its
// digest, or whose data is gone while its metadata stays (object-stores.ts missingChunks) — each the rollout's
// fault, the same on every later try. The last is checked before reading, because the client would wait for those
// chunks for ever and hold the rollout's judgement (and the daemon's stop) with it; a read that still gets no chunk
// for FRAME_STALL_MS (chunks evicted after the check, a server not answering) asks again which of the two it was.
import { JetStreamApiCodes, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import type { ObjectInfo, ObjectStore } from "@nats-io/obj";
import { loadOnce } from "../load-once.js";
import { HostFaultError, RolloutRejectedError } from "./errors.js";
import { isDigestMismatch, objectChunks, ObjectStallError } from "./object-chunks.js";
import { missingChunks, objectStores } from "./object-stores.js";
import { isApiError } from "./reconcile.js";

/** The frames object store and the JetStream manager that sees its stream. */
export interface FrameObjects {
  store: ObjectStore;
  jsm: JetStreamManager;
}

/** How long a frame's read may wait for its next chunk (a frame is a few chunks of ≤ max_payload on a server that
 *  answers in milliseconds); a stall with the chunks all there is the host's and is judged again later. */
export const FRAME_STALL_MS = 10_000;

export function frameObjectOpener(nc: NatsConnection, bucket: string): () => Promise<FrameObjects> {
  return loadOnce(async () => {
    const jsm = await jetstreamManager(nc, { timeout: 10_000 });
    await jsm.streams.info(`OBJ_${bucket}`);
    return { store: await objectStores(nc).open(bucket, false), jsm };
  });
}

/** The encoded bytes of frame object `name`; a RolloutRejectedError with its reason when the object is at fault. */
export async function readFrameObject(name: string, objects: () => Promise<FrameObjects>, maxBytes: number, stallMs = FRAME_STALL_MS): Promise<Buffer> {
  const label = `frame object ${JSON.stringify(name)}`;
  let opened: FrameObjects;
  try {
    opened = await objects();
  } catch (cause) {
    // a bucket that does not exist is the configuration's or the host's fault (frames.objectBucket mistyped, the
    // bucket not made yet), as a disconnect is: never the rollout's, so judged again later
    if (!isApiError(cause, JetStreamApiCodes.StreamNotFound)) throw cause;
    throw new HostFaultError(`${label}: the frames object store does not exist (frames.objectBucket)`, { cause });
  }
  const { store, jsm } = opened;
  const info = await store.info(name);
  if (!info || info.deleted) throw new RolloutRejectedError("image_missing", `${label} not found`);
  if (info.size > maxBytes) throw new RolloutRejectedError("image_too_large", `${label} has ${info.size} bytes, frames.maxBytes is ${maxBytes}`);
  await refuseIfDataGone(jsm, info, label);
  const result = await store.get(name);
  if (!result) throw new RolloutRejectedError("image_missing", `${label} not found`);
  result.error.catch(() => undefined); // the same failure reaches the data stream, read below
  const parts: Uint8Array[] = [];
  let size = 0;
  try {
    for await (const chunk of objectChunks(label, result.data, stallMs)) {
      size += chunk.byteLength;
      // more than its metadata says: chunks added behind the store's back (the digest cannot match); not buffered
      if (size > info.size) throw new RolloutRejectedError("image_corrupt", `${label}: its chunks hold more than its ${info.size} bytes`);
      parts.push(chunk);
    }
  } catch (cause) {
    if (isDigestMismatch(cause)) throw new RolloutRejectedError("image_corrupt", `${label}: its chunks do not match its digest`, { cause });
    if (!(cause instanceof ObjectStallError)) throw cause;
    await refuseIfDataGone(jsm, info, label);
    throw new HostFaultError(cause.message, { cause });
  }
  return Buffer.concat(parts, size);
}

async function refuseIfDataGone(jsm: JetStreamManager, info: ObjectInfo, label: string): Promise<void> {
  const missing = await missingChunks(jsm, info);
  if (missing > 0) {
    throw new RolloutRejectedError("image_missing", `${label}: ${missing} of its ${info.chunks} chunks are gone from the store (its metadata outlived its data: a put that failed, or the bucket's limits)`);
  }
}
