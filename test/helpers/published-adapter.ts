// A published adapter as a consumer (vLLM's loader) gets it: the files of an adapter.published event, read back from
// the object store (bucket rlloop-adapters, <policy>/r<round>/<file>) into a folder, each checked against the
// sha256 and size the event announces.
import { createHash } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { NatsConnection } from "@nats-io/nats-core";
import { Objm } from "@nats-io/obj";
import { expect } from "vitest";
import type { AdapterPublished } from "../../src/contract/index.js";

/** Writes the event's files from its bucket into `dir` (a PEFT adapter folder) and returns `dir`. */
export async function fetchPublishedAdapter(nc: NatsConnection, event: AdapterPublished, dir: string): Promise<string> {
  const store = await new Objm(nc).open(event.bucket);
  await mkdir(dir, { recursive: true });
  for (const file of event.files) {
    const blob = await store.getBlob(file.object);
    expect(blob, `round ${event.round}: object ${file.object} in ${event.bucket}`).not.toBeNull();
    expect(blob?.byteLength, `round ${event.round}: ${file.name} size`).toBe(file.size);
    expect(createHash("sha256").update(blob!).digest("hex"), `round ${event.round}: ${file.name} sha256`).toBe(file.sha256);
    await writeFile(join(dir, file.name), blob!);
  }
  return dir;
}
