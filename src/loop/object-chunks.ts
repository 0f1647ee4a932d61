// An object's data as the NATS client streams it from an object store, chunk by chunk, with a limit on the wait for
// each chunk. The client waits for an object's chunks for ever: it reads them through a consumer that ends at the
// last one, and an object whose metadata outlived its chunks (a put that failed after its metadata landed, whose
// chunks the client then purged; a bucket's limits evicting the oldest messages, chunks before the metadata that
// follows them) sends none. Every reader of stored objects goes through here, so none of them can hang on one.
import type { ObjectStore } from "@nats-io/obj";

/** No chunk came within the limit: the object's data is gone, or the server is not answering. */
export class ObjectStallError extends Error {
  override name = "ObjectStallError";
}

/** Whether `err` is the client's verdict on an object whose chunks do not hash to its recorded digest: its stream
 *  fails with it at the last chunk (nats.js names the mismatch in its message; it has no error code for it). Reading
 *  again reads the same chunks. */
export function isDigestMismatch(err: unknown): boolean {
  return /corrupt object|digests do not match/i.test(String((err as Error | null)?.message));
}

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

/**
 * The chunks of `data` (an object store get's stream) in order; an ObjectStallError when none comes for `stallMs`.
 * A caller that stops early (a break, a throw) cancels the client's consumer instead of leaving it filling a stream
 * nobody reads.
 */
export async function* objectChunks(object: string, data: ReadableStream<Uint8Array>, stallMs: number): AsyncGenerator<Uint8Array> {
  const reader = data.getReader();
  let bytes = 0;
  let ended = false;
  try {
    for (;;) {
      const next = await nextChunk(reader, stallMs);
      if (next === STALLED) throw new ObjectStallError(`object ${object}: no data for ${stallMs / 1000} s after ${bytes} bytes (its chunks missing, or the server not answering)`);
      if (next.done) {
        ended = true;
        return;
      }
      bytes += next.value.byteLength;
      yield next.value;
    }
  } finally {
    if (!ended) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}

/** The whole of a small object (a manifest), or null when there is none; an ObjectStallError when its data does not
 *  come, the client's error when its chunks do not hash to its digest. */
export async function objectBytes(store: ObjectStore, name: string, stallMs: number): Promise<Uint8Array | null> {
  const result = await store.get(name);
  if (!result) return null;
  result.error.catch(() => undefined); // the same failure reaches the data stream, read below
  const parts: Uint8Array[] = [];
  for await (const chunk of objectChunks(name, result.data, stallMs)) parts.push(chunk);
  return Buffer.concat(parts);
}
