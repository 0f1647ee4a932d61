// `{object}` frames read from the workers' object store (src/loop/frame-objects.ts) against a real nats-server, for
// what a rollout's frame object can be beside a good one: gone whole or in part while its metadata stays, grown by
// chunks behind the store's back, or losing its chunks between the check and the read (the race the read's stall
// limit is for; the JetStream manager is wrapped to answer the check as it was before the chunks went). The rollout
// loses only for what is wrong with its object; a stall with the object whole is the host's, judged again later.
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import type { ObjectStore } from "@nats-io/obj";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HostFaultError, isTransient, RolloutRejectedError } from "../src/loop/errors.js";
import { frameObjectOpener, readFrameObject, type FrameObjects } from "../src/loop/frame-objects.js";
import { objectStores } from "../src/loop/object-stores.js";
import { bytesStream, testFrame } from "./helpers/loop.js";
import { startNatsServer, type NatsServer } from "./helpers/nats.js";

const BUCKET = "rlloop-test-frames";
/** The stall limit where the test expects a stall; reads of data that is there keep the daemon's own (a loaded CI
 *  machine can take longer than a short limit between two chunks). */
const STALL_MS = 300;

describe("loop - frame objects", () => {
  let server: NatsServer;
  let nc: NatsConnection;
  let store: ObjectStore;
  let jsm: JetStreamManager;
  let png: Buffer;
  let opener: () => Promise<FrameObjects>;

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    store = await objectStores(nc).create(BUCKET);
    jsm = await jetstreamManager(nc);
    png = await testFrame();
    opener = frameObjectOpener(nc, BUCKET);
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  const read = (name: string, objects = opener, stallMs?: number) => readFrameObject(name, objects, 1 << 20, stallMs);
  /** An object of several 64-byte chunks, and the stream sequence of its first chunk. */
  const putChunked = async (name: string) => {
    const before = (await jsm.streams.info(`OBJ_${BUCKET}`)).state.last_seq;
    const info = await store.put({ name, options: { max_chunk_size: 64 } }, bytesStream(png));
    expect(info.chunks).toBeGreaterThan(2);
    return { info, firstChunk: before + 1 };
  };
  const reason = (err: unknown) => (err instanceof RolloutRejectedError ? err.reason : `not rejected: ${String(err)}`);

  it("reads a whole object, in one chunk or several", async () => {
    await store.putBlob({ name: "ok/one.png" }, png);
    await putChunked("ok/several.png");
    expect(Buffer.compare(await read("ok/one.png"), png)).toBe(0);
    expect(Buffer.compare(await read("ok/several.png"), png)).toBe(0);
  });

  it("refuses an object whose data is gone, whole or one chunk of several, without waiting for it", async () => {
    const gone = await store.putBlob({ name: "gone/all.png" }, png);
    await jsm.streams.purge(`OBJ_${BUCKET}`, { filter: `$O.${BUCKET}.C.${gone.nuid}` });
    const { firstChunk } = await putChunked("gone/first-chunk.png");
    await jsm.streams.deleteMessage(`OBJ_${BUCKET}`, firstChunk);
    for (const name of ["gone/all.png", "gone/first-chunk.png"]) {
      // a stall limit as long as vitest's test timeout: only the count before the read can refuse it in time
      const err = await read(name, opener, 600_000).catch((e: unknown) => e);
      expect(reason(err), name).toBe("image_missing");
      expect((err as Error).message).toMatch(/chunks are gone from the store/);
    }
  });

  it("refuses a link (not followed) and metadata that does not describe its data", async () => {
    const target = await store.putBlob({ name: "target.png" }, png);
    await store.link("link.png", target);
    const link = await read("link.png").catch((e: unknown) => e);
    expect(reason(link)).toBe("image_unreadable");
    expect((link as Error).message).toMatch(/is a link/);
    // metadata written by hand: a nuid that would make the chunks' count a wildcard's, and a chunk count that is not one
    const metaSubject = (name: string) => `$O.${BUCKET}.M.${Buffer.from(name).toString("base64url").padEnd(Math.ceil(name.length / 3) * 4, "=")}`;
    const malformed = [["wild.png", { nuid: ">" }], ["uncounted.png", { chunks: "many" }], ["no-chunks.png", { chunks: 0 }], ["empty-chunks.png", { chunks: target.size + 1 }]] as const;
    for (const [name, fields] of malformed) {
      const meta = { ...target, name, ...fields, mtime: new Date().toISOString() };
      await jsm.jetstream().publish(metaSubject(name), JSON.stringify(meta));
      const err = await read(name).catch((e: unknown) => e);
      expect(reason(err), name).toBe("image_corrupt");
      expect((err as Error).message).toMatch(/metadata does not describe its data/);
    }
  });

  it("a JetStream API error while judging (the bucket deleted since it was opened) is the host's, judged again later", async () => {
    const other = await objectStores(nc).create("rlloop-test-frames-deleted");
    await other.putBlob({ name: "f.png" }, png);
    const objects = frameObjectOpener(nc, "rlloop-test-frames-deleted");
    expect(Buffer.compare(await readFrameObject("f.png", objects, 1 << 20), png)).toBe(0);
    await other.destroy();
    const err = await readFrameObject("f.png", objects, 1 << 20).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(RolloutRejectedError);
    expect(isTransient(err)).toBe(true);
  });

  it("refuses an object grown by chunks behind the store's back, and a missing one", async () => {
    const grown = await store.putBlob({ name: "grown.png" }, png);
    await jsm.jetstream().publish(`$O.${BUCKET}.C.${grown.nuid}`, new Uint8Array(16).fill(1));
    expect(reason(await read("grown.png").catch((e: unknown) => e))).toBe("image_corrupt");
    expect(reason(await read("no/such.png").catch((e: unknown) => e))).toBe("image_missing");
  });

  /** The frames store whose chunk counts answer "whole" to its first `lies` checks (the count as it was before the
   *  chunks went), then as the server does; and how many checks were made. */
  const countsWholeFor = async (lies: number) => {
    const real = await opener();
    let checks = 0;
    const streams = new Proxy(real.jsm.streams, {
      get: (target, key, receiver) =>
        key !== "info" ? Reflect.get(target, key, receiver) : async (stream: string, opts?: { subjects_filter?: string }) => {
          const info = await target.info(stream, opts);
          if (opts?.subjects_filter && checks++ < lies) info.state.subjects = { [opts.subjects_filter]: Number.MAX_SAFE_INTEGER };
          return info;
        },
    });
    const jsm = new Proxy(real.jsm, { get: (target, key, receiver) => (key === "streams" ? streams : Reflect.get(target, key, receiver)) });
    return { objects: async () => ({ store: real.store, jsm }), checks: () => checks };
  };

  it("a read that stalls is the object's fault when its chunks went since the check, else the host's", async () => {
    const gone = await store.putBlob({ name: "race/gone.png" }, png);
    await jsm.streams.purge(`OBJ_${BUCKET}`, { filter: `$O.${BUCKET}.C.${gone.nuid}` });
    // the check passes (the count as it was), the read stalls, the second check sees the chunks gone
    const race = await countsWholeFor(1);
    expect(reason(await read("race/gone.png", race.objects, STALL_MS).catch((e: unknown) => e))).toBe("image_missing");
    expect(race.checks()).toBe(2);
    // both checks see the object whole (as a server that stopped answering its consumer would leave it): the host's
    const stalled = await read("race/gone.png", (await countsWholeFor(2)).objects, STALL_MS).catch((e: unknown) => e);
    expect(stalled).toBeInstanceOf(HostFaultError);
    expect((stalled as Error).message).toMatch(/no data for 0.3 s/);
  });
});
