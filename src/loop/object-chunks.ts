// An object's data as the NATS client streams it from an object store, chunk by chunk, with a limit on the wait for
// each chunk. The client waits for an object's chunks for ever: it reads them through a consumer that ends at the
// last one, and an object whose metadata outlived its chunks (a put that failed after its metadata landed, whose
// chunks the client then purged; a bucket's age limit removing the oldest messages, chunks before the metadata
// that follows them) sends none. Every reader of stored objects goes through here, so none of them can hang on one.
import type { ObjectStore } from "@nats-io/obj";

/** No chunk came within the limit: the object's data is gone, or the server is not answering. */
export class ObjectStallError extends Error {
  override name = "ObjectStallError";
}

/** The chunks hold more bytes than the object's metadata says (chunks added behind the store's back). */
export class ObjectOverflowError extends Error {
  override name = "ObjectOverflowError";
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
 * The chunks of `data` (an object store get's stream) in order; an ObjectStallError, its message led by `label` (the
 * object, as the caller names it), when none comes for `stallMs`.
 * A caller that stops early (a break, a throw) cancels the client's consumer instead of leaving it filling a stream
 * nobody reads.
 */
export async function* objectChunks(label: string, data: ReadableStream<Uint8Array>, stallMs: number): AsyncGenerator<Uint8Array> {
  const reader = data.getReader();
  let bytes = 0;
  let ended = false;
  try {
    for (;;) {
      const next = await nextChunk(reader, stallMs);
      if (next === STALLED) throw new ObjectStallError(`${label}: no data for ${stallMs / 1000} s after ${bytes} bytes (its chunks missing, or the server not answering)`);
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

/** The chunks of `data` in one buffer, refusing more than `size` bytes (ObjectOverflowError) without buffering them. */
export async function collectChunks(label: string, data: ReadableStream<Uint8Array>, stallMs: number, size: number): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  let bytes = 0;
  for await (const chunk of objectChunks(label, data, stallMs)) {
    bytes += chunk.byteLength;
    if (bytes > size) throw new ObjectOverflowError(`${label}: its chunks hold more than its ${size} bytes`);
    parts.push(chunk);
  }
  return Buffer.concat(parts, bytes);
}

/** The whole of a small object (a manifest), or null when there is none; an ObjectStallError when its data does not
 *  come, the client's error when its chunks do not hash to its digest. */
export async function objectBytes(store: ObjectStore, name: string, stallMs: number): Promise<Uint8Array | null> {
  const result = await store.get(name);
  if (!result) return null;
  result.error.catch(() => undefined); // the same failure reaches the data stream, read below
  return collectChunks(`object ${name}`, result.data, stallMs, result.info.size);
}
