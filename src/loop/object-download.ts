// Streams one object of a JetStream object store to a local file while hashing it, and refuses it unless its
// sha256 and size are the recorded ones. Used where the daemon continues from objects stored by another host
// (continuation.ts) and by the reloader that brings adapters to vLLM's disk (src/tools/reload).
import { createHash } from "node:crypto";
import { open } from "node:fs/promises";
import type { ObjectStore } from "@nats-io/obj";
import { isDigestMismatch, objectChunks } from "./object-chunks.js";

/** The object is missing, or differs from what was recorded of it: retrying will not change that. */
export class ObjectIntegrityError extends Error {
  override name = "ObjectIntegrityError";
}

export interface RecordedObject {
  object: string;
  sha256: string;
  size: number;
}

/** How long a download may go without receiving a chunk before it gives up (a chunk is up to the server's
 *  max_payload: 64 MiB at most, over a minute only on a link slower than ~0.5 MB/s). */
export const DOWNLOAD_STALL_MS = 120_000;

/** Writes `file.object` to `target` (fsynced); an ObjectIntegrityError when it is missing or not as recorded. An
 *  object whose data does not come (its chunks missing, object-chunks.ts) fails after `stallMs` without a chunk,
 *  with an ObjectStallError: the caller's retry decides. */
export async function downloadObject(store: ObjectStore, file: RecordedObject, target: string, stallMs = DOWNLOAD_STALL_MS): Promise<void> {
  // the file first: a get starts the client's consumer, which nobody would read if the open failed
  const handle = await open(target, "w");
  const hash = createHash("sha256");
  let size = 0;
  let storeError: Promise<Error | null> = Promise.resolve(null);
  try {
    const result = await store.get(file.object);
    if (result === null) throw new ObjectIntegrityError(`object ${file.object} not found in bucket`);
    // read below once the data ended; handled from the start (a download given up early never reads it)
    storeError = result.error.then(() => null, (err: Error) => err);
    for await (const chunk of objectChunks(`object ${file.object}`, result.data, stallMs)) {
      hash.update(chunk);
      size += chunk.byteLength;
      await handle.write(chunk);
    }
    await handle.sync();
  } catch (err) {
    if (isDigestMismatch(err)) throw new ObjectIntegrityError(`object ${file.object}: ${(err as Error).message}`, { cause: err });
    throw err;
  } finally {
    await handle.close();
  }
  const error = await storeError;
  if (error) throw new ObjectIntegrityError(`object ${file.object}: ${error.message}`, { cause: error });
  const digest = hash.digest("hex");
  if (digest !== file.sha256) throw new ObjectIntegrityError(`object ${file.object}: sha256 ${digest} differs from the recorded ${file.sha256}`);
  if (size !== file.size) throw new ObjectIntegrityError(`object ${file.object}: ${size} bytes, recorded ${file.size}`);
}
