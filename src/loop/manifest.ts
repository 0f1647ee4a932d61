// manifest.json of a round folder (the schema is the contract's Manifest): written atomically; a manifest that
// exists but is not committed is the round a restart re-runs, its `events` the exact (stream sequence, id) pairs.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { decodeWithNonFinite, encodeWithNonFinite, parseManifest, type Manifest } from "../contract/index.js";
import { writeFileAtomic } from "../files.js";

export type { Manifest } from "../contract/index.js";

export const MANIFEST_FILE = "manifest.json";

export async function readManifest(dir: string): Promise<Manifest | null> {
  let text: string;
  try {
    text = await readFile(join(dir, MANIFEST_FILE), "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
  return parseManifest(decodeWithNonFinite(text));
}

export async function writeManifest(dir: string, manifest: Manifest): Promise<void> {
  await writeFileAtomic(join(dir, MANIFEST_FILE), `${encodeWithNonFinite(manifest, 2)}\n`);
}

/** A new manifest object with `patch` applied and updated_at set; the input is not modified. */
export function updated(manifest: Manifest, patch: Partial<Manifest>): Manifest {
  return { ...manifest, ...patch, updated_at: new Date().toISOString() };
}
