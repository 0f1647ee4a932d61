// `{object}` frames: the workers' object store of frames (frames.objectBucket), opened once and lazily, and the read of
// one frame from it. nats.js reports a missing object store as a bare Error("object store not found"); the opener
// asks for the bucket's stream first, so a missing bucket surfaces as JetStream's StreamNotFound code and anything
// else (a disconnect) as itself. A failed open is tried again next time.
//
// What the read refuses, and why: an object not there, a link (not followed), metadata that does not describe its
// data, larger than frames.maxBytes, chunks that do not hash to its digest, or data gone while the metadata stays
// (object-stores.ts missingChunks) — each the rollout's fault, the same on every later try. Gone data is counted
// before reading: with every chunk gone the client would wait for ever and hold the rollout's judgement (intake
// judges 4 at once, so four such rollouts stopped the stream) and the daemon's stop with it. A read that still gets
// no chunk for FRAME_STALL_MS (chunks gone after the count, a server not answering) counts again: gone → the
// rollout's, all there → the host's, judged again later.
import { JetStreamApiCodes, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import type { ObjectInfo, ObjectStore } from "@nats-io/obj";
import { loadOnce } from "../load-once.js";
import { HostFaultError, RolloutRejectedError } from "./errors.js";
import { collectChunks, isDigestMismatch, ObjectOverflowError, ObjectStallError } from "./object-chunks.js";
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
  const { store, jsm } = await openStore(objects, label);
  // Looked at before the read because the client follows a link without a bound (a link to itself never returns)
  // and into any bucket, creating one that does not exist.
  refuseMetadata(await store.info(name), label, maxBytes);
  const result = await store.get(name);
  if (!result) throw new RolloutRejectedError("image_missing", `${label} not found`);
  result.error.catch(() => undefined); // the same failure reaches the data stream, read below
  try {
    // judged on the metadata the read goes by (a put that replaced the object since is read, and judged, as it is now)
    refuseMetadata(result.info, label, maxBytes);
    await refuseIfDataGone(jsm, result.info, label);
  } catch (err) {
    await result.data.cancel().catch(() => undefined); // stops the client's consumer
    throw err;
  }
  try {
    return await collectChunks(label, result.data, stallMs, result.info.size);
  } catch (cause) {
    if (cause instanceof ObjectOverflowError) throw new RolloutRejectedError("image_corrupt", `${label}: its chunks hold more than its ${result.info.size} bytes`, { cause });
    if (isDigestMismatch(cause)) throw new RolloutRejectedError("image_corrupt", `${label}: its chunks do not match its digest`, { cause });
    if (!(cause instanceof ObjectStallError)) throw cause;
    await refuseIfDataGone(jsm, result.info, label);
    throw new HostFaultError(cause.message, { cause });
  }
}

async function openStore(objects: () => Promise<FrameObjects>, label: string): Promise<FrameObjects> {
  try {
    return await objects();
  } catch (cause) {
    // a bucket that does not exist is the configuration's or the host's fault (frames.objectBucket mistyped, the
    // bucket not made yet), as a disconnect is: never the rollout's, so judged again later
    if (!isApiError(cause, JetStreamApiCodes.StreamNotFound)) throw cause;
    throw new HostFaultError(`${label}: the frames object store does not exist (frames.objectBucket)`, { cause });
  }
}

/** An object the frame cannot be: none, a link, metadata that does not describe chunks, over frames.maxBytes. */
function refuseMetadata(info: ObjectInfo | null, label: string, maxBytes: number): void {
  if (!info || info.deleted) throw new RolloutRejectedError("image_missing", `${label} not found`);
  if (info.options?.link) throw new RolloutRejectedError("image_unreadable", `${label} is a link; links are not followed (put the frame itself)`);
  // the nuid names the chunks' subject: anything but a plain token would make their count a wildcard's; data needs
  // a chunk, and a chunk is not empty (no chunks for bytes would read as none missing, then stall as the host's)
  const counts = Number.isSafeInteger(info.size) && Number.isSafeInteger(info.chunks) && info.size >= 0 && info.chunks >= 0
    && (info.size === 0) === (info.chunks === 0) && info.chunks <= info.size;
  if (!counts || !/^[A-Za-z0-9]+$/.test(info.nuid ?? "")) {
    throw new RolloutRejectedError("image_corrupt", `${label}: its metadata does not describe its data (size ${info.size}, chunks ${info.chunks}, nuid ${JSON.stringify(info.nuid)})`);
  }
  if (info.size > maxBytes) throw new RolloutRejectedError("image_too_large", `${label} has ${info.size} bytes, frames.maxBytes is ${maxBytes}`);
}

async function refuseIfDataGone(jsm: JetStreamManager, info: ObjectInfo, label: string): Promise<void> {
  const missing = await missingChunks(jsm, info);
  if (missing > 0) {
    throw new RolloutRejectedError("image_missing", `${label}: ${missing} of its ${info.chunks} chunks are gone from the store (its metadata outlived its data: a put that failed, or the bucket's age limit)`);
  }
}
