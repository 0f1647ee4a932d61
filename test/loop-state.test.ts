// The committed state's compare-and-set (src/loop/state.ts) against a real nats-server, with faults injected into
// the real KV client's update: a write that fails before it lands is retried (not taken for a second daemon), a
// write whose reply is lost counts as done, and only a record another writer moved is a conflict.
import type { KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/nats-core";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { StateConflictError } from "../src/loop/errors.js";
import { StateStore, type StateRecord } from "../src/loop/state.js";
import { startNatsServer, type NatsServer } from "./helpers/nats.js";

describe("loop - committed state's compare-and-set", () => {
  let server: NatsServer;
  let nc: NatsConnection;

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
  });

  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  const record = (policy: string, round: number): StateRecord => ({
    version: 2, policy, round, outcome: "published",
    adapter: { round, path: `/w/${policy}/${round}/adapter`, sha256: null },
    reference: { path: "/w/ref", sha256: null },
    last_seq: round * 4, ack_floor: round * 4, recent_adapters: [], unpublished: [], outcomes: { range: null, adapters: [] }, lineage: [], rollback: null, at: "2026-12-03T00:00:00.000Z",
  });

  /** The store's real KV client, its update() failing once as `fault` says. */
  async function storeWithFault(policy: string, fault: "before-write" | "reply-lost") {
    const store = await StateStore.open(nc, policy, 1);
    const kv = (store as unknown as { kv: KV }).kv;
    const update = kv.update.bind(kv);
    let armed = true;
    kv.update = async (...args: Parameters<KV["update"]>) => {
      if (!armed) return update(...args);
      armed = false;
      if (fault === "reply-lost") await update(...args);
      throw new Error("TIMEOUT");
    };
    return store;
  }

  it("a write that did not land is the caller's to retry, not a conflict; the retry commits", async () => {
    const store = await storeWithFault("before-write", "before-write");
    const first = await store.commit(record("before-write", 1), 0);
    const failure = await store.commit(record("before-write", 2), first).catch((err: Error) => err);
    expect(failure).toBeInstanceOf(Error);
    expect(failure).not.toBeInstanceOf(StateConflictError);
    expect((failure as Error).message).toBe("TIMEOUT");
    const second = await store.commit(record("before-write", 2), first);
    expect(second).toBeGreaterThan(first);
    expect((await store.read())?.record.round).toBe(2);
  });

  it("a write whose reply was lost counts as committed, at the revision it landed on", async () => {
    const store = await storeWithFault("reply-lost", "reply-lost");
    const first = await store.commit(record("reply-lost", 1), 0);
    const second = await store.commit(record("reply-lost", 2), first);
    expect(second).toBe((await store.read())?.revision);
    expect((await store.read())?.record.round).toBe(2);
  });

  it("a record another writer moved is a conflict that names the revisions", async () => {
    const mine = await StateStore.open(nc, "moved", 1);
    const theirs = await StateStore.open(nc, "moved", 1);
    const first = await mine.commit(record("moved", 1), 0);
    const moved = await theirs.commit(record("moved", 2), first);
    await expect(mine.commit(record("moved", 3), first)).rejects.toThrow(StateConflictError);
    await expect(mine.commit(record("moved", 3), first)).rejects.toThrow(
      `state of policy moved moved: expected revision ${first}, found ${moved} (round 2); is another daemon running on this policy?`,
    );
  });
});
