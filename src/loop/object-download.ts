// Streams one object of a JetStream object store to a local file while hashing it, and refuses it unless its
// sha256 and size are the recorded ones. Used where the daemon continues from objects stored by another host
// (continuation.ts) and by the reloader that brings adapters to vLLM's disk (src/tools/reload).
import { createHash } from "node:crypto";
import { open } from "node:fs/promises";
import type { ObjectStore } from "@nats-io/obj";

/** The object is missing, or differs from what was recorded of it: retrying will not change that. */
export class ObjectIntegrityError extends Error {
  override name = "ObjectIntegrityError";
}

export interface RecordedObject {
  object: string;
  sha256: string;
  size: number;
}

/** Writes `file.object` to `target` (fsynced); an ObjectIntegrityError when it is missing or not as recorded. */
export async function downloadObject(store: ObjectStore, file: RecordedObject, target: string): Promise<void> {
  const result = await store.get(file.object);
  if (result === null) throw new ObjectIntegrityError(`object ${file.object} not found in bucket`);
  const hash = createHash("sha256");
  const handle = await open(target, "w");
  let size = 0;
  try {
    for await (const chunk of result.data) {
      hash.update(chunk);
      size += chunk.byteLength;
      await handle.write(chunk);
    }
    await handle.sync();
  } finally {
    await handle.close();
  }
  const storeError = await result.error;
  if (storeError) throw new ObjectIntegrityError(`object ${file.object}: ${storeError.message}`, { cause: storeError });
  const digest = hash.digest("hex");
  if (digest !== file.sha256) throw new ObjectIntegrityError(`object ${file.object}: sha256 ${digest} differs from the recorded ${file.sha256}`);
  if (size !== file.size) throw new ObjectIntegrityError(`object ${file.object}: ${size} bytes, recorded ${file.size}`);
}
