// Everything a round continues from lives in NATS, not only on the active daemon's disk, so that a daemon on another
// host (a standby, or a fresh host with an empty work dir) continues the loop: before each commit the round's adapter
// folder — the adapter, the optimizer state that continues it (optimizer.safetensors + optimizer.json), its stats —
// and the committed manifest go into object store `rlloop-adapters` under `<policy>/r<round>/` (beside the published
// adapter files), the reference adapter under `<policy>/reference/` once, and the state record names those objects.
// A starting daemon whose disk lacks them downloads them into its own work dir (`adapterFolders`), and the manifests
// of the last committed rounds (`syncManifests`), from which recovery knows the stream sequences already applied.
// The optimizer state of an adapter no round continues any more is deleted from the store (the adapter stays: the
// reloader may still fetch it).
import { mkdir, readdir, rename, rm, stat } from "node:fs/promises";
import { createReadStream } from "node:fs";
import { join } from "node:path";
import { Readable } from "node:stream";
import type { JetStreamManager } from "@nats-io/jetstream";
import type { ObjectInfo, ObjectStore } from "@nats-io/obj";
import type { Logger } from "pino";
import { ADAPTER_BUCKET, adapterObjectPrefix, decodeWithNonFinite, encodeWithNonFinite, parseManifest, referenceObjectPrefix, type StoredFolder } from "../contract/index.js";
import { sha256File } from "../files.js";
import { readManifest, writeManifest, type Manifest } from "./manifest.js";
import { policyDir, roundDir, ROUND_DIR_NAME } from "./paths.js";
import { objectBytes } from "./object-chunks.js";
import { downloadObject } from "./object-download.js";
import { chunksPresent, purgeChunks } from "./object-stores.js";
import type { StateRecord } from "./state.js";

/** Files of an adapter folder a round continues from, those present: the PEFT adapter, rlloop's optimizer state and
 *  its sidecar, a seed run's optimizer.pt, the round's statistics. */
export const CONTINUATION_FILES = ["adapter_config.json", "adapter_model.safetensors", "optimizer.safetensors", "optimizer.json", "optimizer.pt", "stats.json"] as const;
/** The frozen reference needs its weights only. */
const REFERENCE_FILES = ["adapter_config.json", "adapter_model.safetensors"] as const;
const OPTIMIZER_FILES = ["optimizer.safetensors", "optimizer.json", "optimizer.pt"] as const;
const MANIFEST_OBJECT = "manifest.json";
/** Objects go up in chunks of the server's max_payload (the client caps the size there), not the client's default
 *  128 KiB: each chunk is one acknowledged publish, and a 9B adapter's continuation is ~0.5 GB with its optimizer
 *  state (bench/object-upload.ts measures the upload; the hash is the other half, object-stores.ts). */
const CHUNK_BYTES = 64 * 1024 * 1024;

/** Puts the folder's files under `prefix` (an object already holding the same bytes, data included, is left as it
 *  is), all files at once: one file's hashing overlaps another's upload. `known`: what a committed record says these
 *  objects hold (publish.ts): an object whose digest and size agree with it is not hashed again. `jsm`: the store's
 *  connection's, for its chunks (object-stores.ts). */
export async function storeFolder(
  store: ObjectStore, jsm: JetStreamManager, dir: string, prefix: string, names: readonly string[] = CONTINUATION_FILES, known?: StoredFolder,
): Promise<StoredFolder> {
  const vouched = (name: string) => (known?.prefix === prefix ? known.files.find((f) => f.name === name) : undefined);
  // settled, not all: a retry of this step must not start while a put of the failed attempt is still in flight
  const settled = await Promise.allSettled(names.map((name) => storeFile(store, jsm, join(dir, name), `${prefix}/${name}`, vouched(name))));
  const failed = settled.find((s) => s.status === "rejected");
  if (failed) throw failed.reason;
  const files = names.flatMap((name, i) => {
    const s = settled[i];
    return s?.status === "fulfilled" && s.value ? [{ name, ...s.value }] : [];
  });
  return { bucket: ADAPTER_BUCKET, prefix, files };
}

/** One file as an object; null when the file is absent. The file is read once when the object is new (a round's
 *  own prefix, the usual case): its sha256 is then the digest the client computed of the bytes it put. */
async function storeFile(store: ObjectStore, jsm: JetStreamManager, path: string, object: string, vouched?: { sha256: string; size: number }): Promise<{ sha256: string; size: number } | null> {
  const info = await stat(path).catch(() => null);
  if (!info?.isFile()) return null;
  const existing = await store.info(object);
  if (existing && !existing.deleted && existing.size === info.size && (await chunksPresent(jsm, existing))) {
    const stored = digestHex(existing.digest);
    if (vouched && vouched.size === info.size && vouched.sha256 === stored) return { sha256: stored, size: info.size };
    const sha256 = await sha256File(path);
    if (sha256 === stored) return { sha256, size: info.size };
  }
  const put = await store.put({ name: object, options: { max_chunk_size: CHUNK_BYTES } }, Readable.toWeb(createReadStream(path)) as ReadableStream<Uint8Array>)
    .catch(async (err: unknown) => {
      await forgetFailedPut(store, jsm, object, existing);
      throw err;
    });
  const sha256 = digestHex(put.digest);
  return sha256 === "" ? { sha256: await sha256File(path), size: info.size } : { sha256, size: put.size };
}

/**
 * A put can fail after its metadata landed (the reply to that last publish lost: a leader change, a timeout), and
 * the client then purges the chunks it had put: the metadata names this file's digest over no data. storeFile
 * never trusts such an object (its chunks are checked, so a later process does not either); here it is deleted,
 * and the chunks of the object it replaced, which nothing names any more, purged. An object whose chunks are there
 * (the failed put replaced nothing, or another daemon's put did since) stays.
 */
async function forgetFailedPut(store: ObjectStore, jsm: JetStreamManager, object: string, before: ObjectInfo | null): Promise<void> {
  const now = await store.info(object).catch(() => null);
  if (!now || now.deleted || now.nuid === before?.nuid || (await chunksPresent(jsm, now).catch(() => true))) return;
  await store.delete(object).catch(() => undefined);
  if (before && !before.deleted) await purgeChunks(jsm, before).catch(() => undefined);
}

/** Makes `dir` hold the stored files (verified by sha256; an identical folder is kept); written whole or not at all. */
export async function fetchFolder(store: ObjectStore, stored: StoredFolder, dir: string): Promise<void> {
  if (await holds(dir, stored)) return;
  const tmp = `${dir}.fetch-${process.pid}`;
  await rm(tmp, { recursive: true, force: true });
  await mkdir(tmp, { recursive: true });
  try {
    for (const file of stored.files) await downloadObject(store, { object: `${stored.prefix}/${file.name}`, sha256: file.sha256, size: file.size }, join(tmp, file.name));
    await rm(dir, { recursive: true, force: true });
    await rename(tmp, dir);
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    throw err;
  }
}

/** Objects for the next state record: the adapter's continuation (put when it is a new adapter) and the
 *  reference's. Those the record names already are kept while they are all in the store (looked at, not read) and
 *  put again where any is gone: a bucket lost or purged would else leave every standby unable to start while this
 *  daemon says nothing (adapterFolders). */
export async function storeContinuation(store: ObjectStore, jsm: JetStreamManager, next: StateRecord, prev: StateRecord): Promise<StateRecord> {
  const moved = next.adapter.round !== prev.adapter.round || next.adapter.sha256 !== prev.adapter.sha256;
  const adapterObjects = moved || !prev.adapter.objects
    ? await storeFolder(store, jsm, next.adapter.path, adapterObjectPrefix(next.policy, next.adapter.round))
    : await restored(store, jsm, prev.adapter.objects, next.adapter.path, CONTINUATION_FILES);
  const referenceObjects = prev.reference.objects
    ? await restored(store, jsm, prev.reference.objects, next.reference.path, REFERENCE_FILES)
    : await storeFolder(store, jsm, next.reference.path, referenceObjectPrefix(next.policy), REFERENCE_FILES);
  // the lineage entry of the adapter names the same objects: a rollback to it continues them (rollback.ts)
  const lineage = next.lineage.map((e) => (e.round === next.adapter.round ? { ...e, objects: adapterObjects } : e));
  return { ...next, adapter: { ...next.adapter, objects: adapterObjects }, reference: { ...next.reference, objects: referenceObjects }, lineage };
}

/** Objects a record names already: kept as they are while all of them are in the store, put again from `dir` where
 *  any is gone. */
async function restored(store: ObjectStore, jsm: JetStreamManager, named: StoredFolder, dir: string, names: readonly string[]): Promise<StoredFolder> {
  return (await storedWhole(store, jsm, named)) ? named : storeFolder(store, jsm, dir, named.prefix, names, named);
}

/** Whether every object of `folder` is in the store, data included (a few requests; nothing is read). */
async function storedWhole(store: ObjectStore, jsm: JetStreamManager, folder: StoredFolder): Promise<boolean> {
  for (const file of folder.files) {
    const info = await store.info(`${folder.prefix}/${file.name}`);
    if (info === null || info.deleted || info.size !== file.size || digestHex(info.digest) !== file.sha256 || !(await chunksPresent(jsm, info))) return false;
  }
  return true;
}

/** The committed manifest, beside the round's adapter objects (written before the commit, as it will read after it). */
export async function storeManifest(store: ObjectStore, manifest: Manifest): Promise<void> {
  await store.putBlob({ name: `${adapterObjectPrefix(manifest.policy, manifest.round)}/${MANIFEST_OBJECT}` }, new TextEncoder().encode(encodeWithNonFinite(manifest, 2)));
}

/** How long reading a manifest (a few kB, one chunk) may wait for its data: one gone from the store fails the start
 *  that reads it rather than holding it for ever. */
const MANIFEST_STALL_MS = 30_000;

export async function fetchManifest(store: ObjectStore, policy: string, round: number): Promise<Manifest | null> {
  const data = await objectBytes(store, `${adapterObjectPrefix(policy, round)}/${MANIFEST_OBJECT}`, MANIFEST_STALL_MS);
  return data === null ? null : parseManifest(decodeWithNonFinite(new TextDecoder().decode(data)));
}

/** After a commit: the optimizer state of an adapter that neither the record nor its kept lineage (the adapters a
 *  rollback can go back to, issue 23) continues any more is deleted. */
export async function dropOptimizer(store: ObjectStore, previous: StateRecord, next: StateRecord, log: Logger): Promise<void> {
  const keep = new Set([next.adapter.objects?.prefix, ...next.lineage.map((e) => e.objects?.prefix)]);
  const dropped = [previous.adapter.objects, ...previous.lineage.map((e) => e.objects)]
    .filter((o): o is StoredFolder => o !== undefined && !keep.has(o.prefix));
  for (const objects of new Map(dropped.map((o) => [o.prefix, o])).values()) {
    for (const name of OPTIMIZER_FILES) {
      if (!objects.files.some((f) => f.name === name)) continue;
      await store.delete(`${objects.prefix}/${name}`).catch((err: unknown) => log.warn({ err, object: `${objects.prefix}/${name}` }, "old optimizer state not deleted from the object store"));
    }
  }
}

/**
 * The record with its adapters on this disk: a folder named by the record that exists here with the same adapter is
 * used as it is; else the stored objects are downloaded into this work dir. Records without objects (written by an
 * older rlloop, or round 0 before any commit) are returned as they are.
 */
export async function adapterFolders(store: ObjectStore, record: StateRecord, workDir: string, log: Logger): Promise<StateRecord> {
  const local = async (path: string, stored: StoredFolder | undefined, fallback: string): Promise<string> => {
    if (!stored || (await holds(path, stored))) return path;
    log.info({ objects: stored.prefix, dir: fallback }, "fetching from the object store what the next round continues from");
    await fetchFolder(store, stored, fallback);
    return fallback;
  };
  const adapterDir = record.adapter.round === 0 ? join(workDir, "adapters", record.policy, "r0") : join(roundDir(workDir, record.policy, record.adapter.round), "adapter");
  return {
    ...record,
    adapter: { ...record.adapter, path: await local(record.adapter.path, record.adapter.objects, adapterDir) },
    reference: { ...record.reference, path: await local(record.reference.path, record.reference.objects, join(workDir, "adapters", record.policy, "reference")) },
  };
}

/**
 * Brings this work dir's round folders in line with the committed history before recovery reads them: when the
 * committed round's manifest here is not the stored one (this daemon did not commit it: it takes over from one on
 * another host), every folder of a round up to the committed one that differs from the store is replaced by the
 * stored manifest — the last `rounds` of them, which recovery needs — or removed (older ones, or uncommitted work
 * of this daemon's earlier life that another daemon redid).
 */
export async function syncManifests(store: ObjectStore, record: StateRecord, workDir: string, rounds: number, log: Logger): Promise<void> {
  if (record.round === 0) return;
  const policy = record.policy;
  const stored = await fetchManifest(store, policy, record.round);
  if (stored === null) return; // committed by an rlloop that did not store manifests: the local folders are all there is
  const mine = await readManifest(roundDir(workDir, policy, record.round)).catch(() => null);
  if (mine?.train_sha256 === stored.train_sha256 && sameEvents(mine, stored)) return;
  const first = Math.max(1, record.round - rounds + 1);
  let fetched = 0;
  for (let round = record.round; round >= first; round--) {
    const manifest = round === record.round ? stored : await fetchManifest(store, policy, round);
    if (manifest === null) break;
    const dir = roundDir(workDir, policy, round);
    const here = await readManifest(dir).catch(() => null);
    if (here?.status === "committed" && here.train_sha256 === manifest.train_sha256 && sameEvents(here, manifest)) continue;
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true });
    await writeManifest(dir, manifest);
    fetched++;
  }
  // folders of rounds committed elsewhere that this work dir holds uncommitted (older than the window)
  const names = await readdir(policyDir(workDir, policy)).catch(() => [] as string[]);
  for (const name of names.filter((n) => ROUND_DIR_NAME.test(n)).map(Number).filter((r) => r < first)) {
    const here = await readManifest(roundDir(workDir, policy, name)).catch(() => null);
    if (here?.status !== "committed") await rm(roundDir(workDir, policy, name), { recursive: true, force: true });
  }
  log.info({ round: record.round, manifests: fetched }, "took over the committed history from the object store");
}

function sameEvents(a: Manifest, b: Manifest): boolean {
  return a.events.length === b.events.length && a.events.every((e, i) => e.seq === b.events[i]?.seq && e.id === b.events[i]?.id);
}

/** Whether `dir` holds every stored file with its sha256. */
async function holds(dir: string, stored: StoredFolder): Promise<boolean> {
  for (const file of stored.files) {
    const path = join(dir, file.name);
    const info = await stat(path).catch(() => null);
    if (!info?.isFile() || info.size !== file.size || (await sha256File(path)) !== file.sha256) return false;
  }
  return true;
}

/** nats.js names an object's digest `SHA-256=<base64url, padded>`; as hex. */
function digestHex(digest: string): string {
  return digest.startsWith("SHA-256=") ? Buffer.from(digest.slice(8).replace(/=+$/, ""), "base64url").toString("hex") : "";
}
