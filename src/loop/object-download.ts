// Streams one object of a JetStream object store to a local file while hashing it, and refuses it unless its
// sha256 and size are the recorded ones. Used where the daemon continues from objects stored by another host
// (continuation.ts) and by the reloader that brings adapters to vLLM's disk (src/tools/reload).
import { createHash } from "node:crypto";
import { open } from "node:fs/promises";
import type { ObjectStore } from "@nats-io/obj";

const STALLED = Symbol("stalled");

/** The reader's next chunk, or STALLED when none comes within `ms`. */
async function nextChunk(reader: ReadableStreamDefaultReader<Uint8Array>, ms: number): Promise<ReadableStreamReadResult<Uint8Array> | typeof STALLED> {
  let timer: NodeJS.Timeout | undefined;
  const stalled = new Promise<typeof STALLED>((resolve) => (timer = setTimeout(() => resolve(STALLED), ms)));
  try {
    return await Promise.race([reader.read(), stalled]);
  } finally {
    clearTimeout(timer);
  }
}

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
 *  object whose data does not come (its chunks missing: the client waits for them forever) fails after `stallMs`
 *  without a chunk, with an ordinary error: the caller's retry decides. */
export async function downloadObject(store: ObjectStore, file: RecordedObject, target: string, stallMs = DOWNLOAD_STALL_MS): Promise<void> {
  const result = await store.get(file.object);
  if (result === null) throw new ObjectIntegrityError(`object ${file.object} not found in bucket`);
  // read below once the data ended; handled from the start (a download given up early never reads it)
  const storeError = result.error.then(() => null, (err: Error) => err);
  const hash = createHash("sha256");
  const handle = await open(target, "w");
  const reader = result.data.getReader();
  let size = 0;
  let ended = false;
  try {
    for (;;) {
      const next = await nextChunk(reader, stallMs);
      if (next === STALLED) {
        throw new Error(`object ${file.object}: no data for ${stallMs / 1000} s after ${size} of ${file.size} bytes (its chunks missing, or the server unreachable)`);
      }
      if (next.done) break;
      hash.update(next.value);
      size += next.value.byteLength;
      await handle.write(next.value);
    }
    ended = true;
    await handle.sync();
  } finally {
    // given up early (a stall, a failed write): the client's consumer stops instead of filling a stream nobody reads
    if (!ended) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
    await handle.close();
  }
  const error = await storeError;
  if (error) throw new ObjectIntegrityError(`object ${file.object}: ${error.message}`, { cause: error });
  const digest = hash.digest("hex");
  if (digest !== file.sha256) throw new ObjectIntegrityError(`object ${file.object}: sha256 ${digest} differs from the recorded ${file.sha256}`);
  if (size !== file.size) throw new ObjectIntegrityError(`object ${file.object}: ${size} bytes, recorded ${file.size}`);
}
