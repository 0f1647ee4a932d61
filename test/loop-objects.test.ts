// A round's folder into the object store (src/loop/continuation.ts storeFolder), against a real nats-server: the
// sha256 a stored folder records is the object's content in every path — a new object (hashed while put), an
// unchanged one (hashed, not put again), a local file that changed (put again), and a committed record vouching for
// an object (neither hashed nor put) — and fetchFolder verifies what it downloads against those digests. A put that
// failed after its metadata landed (the client then purges its chunks) is put again by the retry, not trusted.
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import type { ObjectStore } from "@nats-io/obj";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fetchFolder, storeFolder } from "../src/loop/continuation.js";
import { objectBytes, ObjectStallError } from "../src/loop/object-chunks.js";
import { downloadObject, ObjectIntegrityError } from "../src/loop/object-download.js";
import { chunksPresent, objectStores } from "../src/loop/object-stores.js";
import { sha256, sha256File } from "../src/files.js";
import { startNatsServer, type NatsServer } from "./helpers/nats.js";

const BUCKET = "rlloop-test-objects";

describe("loop - a folder into the object store", () => {
  let server: NatsServer;
  let nc: NatsConnection;
  let store: ObjectStore;
  let jsm: JetStreamManager;
  let dir: string;

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    store = await objectStores(nc).create(BUCKET);
    jsm = await jetstreamManager(nc);
    dir = await mkdtemp(join(tmpdir(), "rlloop-objects-"));
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const revision = async (name: string) => (await store.info(name))!.revision;

  it("records each object's own sha256 whether it is put, skipped, put again or vouched for", async () => {
    const src = join(dir, "round");
    await mkdir(src, { recursive: true });
    const big = randomBytes(3 * 1024 * 1024 + 17); // several of the client's default chunks, not a whole number
    await writeFile(join(src, "weights.bin"), big);
    await writeFile(join(src, "config.json"), '{"r": 4}\n');
    const names = ["weights.bin", "config.json", "absent.json"];

    const first = await storeFolder(store, jsm, src, "p/r1", names);
    expect(first.files.map((f) => f.name)).toEqual(["weights.bin", "config.json"]); // an absent file is no object
    expect(first.files[0]).toEqual({ name: "weights.bin", sha256: sha256(big), size: big.length });
    expect(first.files[1]!.sha256).toBe(await sha256File(join(src, "config.json")));
    const put = await revision("p/r1/weights.bin");

    // unchanged: hashed, found equal, not put again
    expect(await storeFolder(store, jsm, src, "p/r1", names)).toEqual(first);
    expect(await revision("p/r1/weights.bin")).toBe(put);

    // the local file changed (same size): put again, the new content recorded
    const changed = Buffer.from(big.map((b) => b ^ 0xff));
    await writeFile(join(src, "weights.bin"), changed);
    const second = await storeFolder(store, jsm, src, "p/r1", names);
    expect(second.files[0]!.sha256).toBe(sha256(changed));
    expect(await revision("p/r1/weights.bin")).toBeGreaterThan(put);
    const reput = await revision("p/r1/weights.bin");

    // a record vouching for the objects (publish after the commit): neither hashed nor put, whatever this disk holds
    await writeFile(join(src, "weights.bin"), big);
    expect(await storeFolder(store, jsm, src, "p/r1", names, second)).toEqual(second);
    expect(await revision("p/r1/weights.bin")).toBe(reput);
    // vouching for another prefix counts for nothing: the file is hashed, differs, and is put
    const third = await storeFolder(store, jsm, src, "p/r1", names, { ...second, prefix: "p/r0" });
    expect(third.files[0]!.sha256).toBe(sha256(big));

    // what is downloaded is verified against the recorded digests
    const into = join(dir, "fetched");
    await fetchFolder(store, third, into);
    expect((await readFile(join(into, "weights.bin"))).equals(big)).toBe(true);
  });

  /** The store, except that its first put fails as the client fails when the reply to the metadata's publish is lost
   *  after it landed: the chunks it put are purged, the metadata stays, the put rejects. `deleteFails`: and the first
   *  delete fails too (NATS away). */
  async function losingFirstReply(deleteFails: boolean): Promise<ObjectStore> {
    let putFails = true;
    return Object.create(store, {
      put: {
        value: async (...args: Parameters<ObjectStore["put"]>) => {
          const info = await store.put(...args);
          if (!putFails) return info;
          putFails = false;
          await jsm.streams.purge(`OBJ_${BUCKET}`, { filter: `$O.${BUCKET}.C.${info.nuid}` });
          throw new Error("TIMEOUT (simulated: the metadata landed, its reply did not)");
        },
      },
      delete: {
        value: async (name: string) => {
          if (deleteFails) {
            deleteFails = false;
            throw new Error("simulated: NATS away");
          }
          return store.delete(name);
        },
      },
    }) as ObjectStore;
  }

  it("an unchanged file whose stored object lost one of its chunks is put again, not trusted", async () => {
    const src = join(dir, "holed");
    await mkdir(src, { recursive: true });
    const data = randomBytes(2 * 1024 * 1024 + 5); // three chunks of the server's max_payload (1 MiB)
    await writeFile(join(src, "weights.bin"), data);
    const lastBefore = (await jsm.streams.info(`OBJ_${BUCKET}`)).state.last_seq;
    const first = await storeFolder(store, jsm, src, "p/holed", ["weights.bin"]);
    const put = await store.info("p/holed/weights.bin");
    expect(put!.chunks).toBe(3);
    await jsm.streams.deleteMessage(`OBJ_${BUCKET}`, lastBefore + 1); // its first chunk (a bucket's limits evict oldest first)
    expect(await chunksPresent(jsm, put!)).toBe(false);
    // a vouching record does not make it trusted either: what is vouched for is its content, not its presence
    expect(await storeFolder(store, jsm, src, "p/holed", ["weights.bin"], first)).toEqual(first);
    const again = await store.info("p/holed/weights.bin");
    expect(again!.revision).toBeGreaterThan(put!.revision);
    expect(await chunksPresent(jsm, again!)).toBe(true);
    await fetchFolder(store, first, join(dir, "holed-fetched"));
    expect(Buffer.compare(await readFile(join(dir, "holed-fetched", "weights.bin")), data)).toBe(0);
  });

  it("a download of an object whose chunks are gone fails after its stall time instead of waiting for ever", async () => {
    const data = randomBytes(200_000);
    const info = await store.putBlob({ name: "p/chunkless.bin" }, data);
    await jsm.streams.purge(`OBJ_${BUCKET}`, { filter: `$O.${BUCKET}.C.${info.nuid}` });
    await expect(downloadObject(store, { object: "p/chunkless.bin", sha256: sha256(data), size: data.length }, join(dir, "chunkless.bin"), 500))
      .rejects.toThrow(/no data for 0.5 s after 0 bytes/);
  });

  it("a small object's read (a manifest) gives its bytes, null when there is none, and stalls out when its data is gone", async () => {
    const data = randomBytes(3000);
    const info = await store.putBlob({ name: "p/small.json" }, data);
    expect(Buffer.compare(Buffer.from((await objectBytes(store, "p/small.json", 30_000))!), data)).toBe(0);
    expect(await objectBytes(store, "p/none.json", 30_000)).toBeNull();
    await jsm.streams.purge(`OBJ_${BUCKET}`, { filter: `$O.${BUCKET}.C.${info.nuid}` });
    await expect(objectBytes(store, "p/small.json", 300)).rejects.toBeInstanceOf(ObjectStallError);
  });

  it("a download of an object whose chunks do not hash to its digest is refused as not what was recorded", async () => {
    const data = randomBytes(200_000);
    const info = await store.putBlob({ name: "p/tampered.bin" }, data);
    await jsm.jetstream().publish(`$O.${BUCKET}.C.${info.nuid}`, Buffer.alloc(16, 1)); // a chunk appended behind the store's back
    const download = downloadObject(store, { object: "p/tampered.bin", sha256: sha256(data), size: data.length }, join(dir, "tampered.bin"), 30_000);
    await expect(download).rejects.toBeInstanceOf(ObjectIntegrityError);
    await expect(download).rejects.toThrow(/digests do not match/);
  });

  for (const deleteFails of [false, true]) {
    it(`a put that failed after its metadata landed is put again by the retry${deleteFails ? ", even when deleting what it left failed and the daemon restarted" : ""}`, async () => {
      const src = join(dir, `lost-reply-${deleteFails}`);
      await mkdir(src, { recursive: true });
      const data = randomBytes(1024 * 1024 + 3);
      await writeFile(join(src, "weights.bin"), data);
      const flaky = await losingFirstReply(deleteFails);
      const prefix = `p/lost-${deleteFails}`;

      await expect(storeFolder(flaky, jsm, src, prefix, ["weights.bin"])).rejects.toThrow(/simulated/);
      const left = await store.info(`${prefix}/weights.bin`);
      // an object whose metadata names this file over no data: gone, or (its delete failed: a daemon that restarts
      // then sees the same) found without its chunks below, by this process or any other
      if (!deleteFails) expect(left === null || left.deleted).toBe(true);
      else expect(await chunksPresent(jsm, left!)).toBe(false);

      // the retry: the same process, or (the delete failed) as a restarted daemon would, through another instance
      const stored = await storeFolder(deleteFails ? await objectStores(nc).open(BUCKET) : flaky, jsm, src, prefix, ["weights.bin"]);
      expect(stored.files).toEqual([{ name: "weights.bin", sha256: sha256(data), size: data.length }]);
      expect((await store.info(`${prefix}/weights.bin`))?.nuid).not.toBe(left?.nuid); // put again, not skipped
      const into = join(dir, `fetched-lost-${deleteFails}`);
      await fetchFolder(store, stored, into);
      expect((await readFile(join(into, "weights.bin"))).equals(data)).toBe(true);
    });
  }
});
