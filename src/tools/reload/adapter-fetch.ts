// Brings a published adapter from the object store to local disk, where vLLM can read it:
// `<root>/<policy>/r<round>/{adapter_config.json, adapter_model.safetensors, ...}`. Every file is streamed into a
// temporary directory while hashed, checked against the announcement's sha256 and size, and the directory is
// renamed into place only when all match: vLLM never sees a torn or foreign adapter.
import { mkdir, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import type { ObjectStore } from "@nats-io/obj";
import { sha256File } from "../../files.js";
import { downloadObject, ObjectIntegrityError } from "../../loop/object-download.js";
import type { AdapterPublished } from "../../contract/index.js";

/** The adapter cannot be used as announced (a missing object, a hash that differs, an unsafe file name). */
export class AdapterFetchError extends Error {
  override name = "AdapterFetchError";
}

/** Not worth retrying: the announcement is unusable, or an object is missing or differs from it. */
export const isAdapterFetchError = (err: unknown): boolean => err instanceof AdapterFetchError || err instanceof ObjectIntegrityError;

const REQUIRED_FILES = ["adapter_config.json", "adapter_model.safetensors"] as const;
/** One path segment, no dot-dot: file names come from the announcement and are not trusted. */
const SAFE_FILE = /^(?!\.\.?$)[A-Za-z0-9._-]{1,128}$/;

export function localAdapterDir(root: string, policy: string, round: number): string {
  return join(root, policy, `r${round}`);
}

/** What fetching needs of an announcement (a published adapter, or a rollback's target: issue 23). */
export type FetchedAnnouncement = Pick<AdapterPublished, "policy" | "round" | "name" | "files" | "sha256">;

/** Local directory holding the verified adapter; fetched unless an identical copy is already there. */
export async function fetchAdapter(store: ObjectStore, announcement: FetchedAnnouncement, root: string): Promise<string> {
  checkAnnouncement(announcement);
  const dir = localAdapterDir(root, announcement.policy, announcement.round);
  if (await matchesAnnouncement(dir, announcement)) return dir;
  const tmp = `${dir}.tmp-${process.pid}`;
  await rm(tmp, { recursive: true, force: true });
  await mkdir(tmp, { recursive: true });
  try {
    for (const file of announcement.files) await downloadObject(store, file, join(tmp, file.name));
    await rm(dir, { recursive: true, force: true });
    await rename(tmp, dir);
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    throw err;
  }
  return dir;
}

function checkAnnouncement(a: FetchedAnnouncement): void {
  for (const file of a.files) {
    if (!SAFE_FILE.test(file.name)) throw new AdapterFetchError(`adapter ${a.name}: unsafe file name ${JSON.stringify(file.name)}`);
  }
  for (const required of REQUIRED_FILES) {
    if (!a.files.some((f) => f.name === required)) throw new AdapterFetchError(`adapter ${a.name}: announcement lists no ${required}`);
  }
  const weights = a.files.find((f) => f.name === "adapter_model.safetensors");
  if (weights && weights.sha256 !== a.sha256) {
    throw new AdapterFetchError(`adapter ${a.name}: announced sha256 ${a.sha256} differs from adapter_model.safetensors' ${weights.sha256}`);
  }
}

async function matchesAnnouncement(dir: string, a: FetchedAnnouncement): Promise<boolean> {
  for (const file of a.files) {
    const path = join(dir, file.name);
    const info = await stat(path).catch(() => null);
    if (!info?.isFile() || info.size !== file.size) return false;
    if ((await sha256File(path)) !== file.sha256) return false;
  }
  return true;
}
