// The reloader against a real nats-server and two fake vLLM replicas, one of them failing: each published adapter
// is fetched from the object store, verified, loaded under its versioned name on every healthy replica, checked in
// /v1/models, old versions unloaded beyond `keep`; every replica's outcome is an event on rlloop.<policy>.reloads.
// No timing: each step waits for the events it expects (the suite's timeout stops a hang).
import { createHash } from "node:crypto";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { jetstream, jetstreamManager, type JetStreamClient } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import { Objm, type ObjectStore } from "@nats-io/obj";
import { connect } from "@nats-io/transport-node";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { startReloader, type Reloader, type ReloaderOptions } from "../src/tools/reload/reloader.js";
import {
  ADAPTER_BUCKET, EVENT_STREAM, EVENT_STREAM_SUBJECTS, ReplicaEvent, adapterName, adapterObjectPrefix, subjects,
  type AdapterPublished,
} from "../src/contract/index.js";
import { startFakeVllm, type FakeVllm } from "./helpers/fake-vllm.js";
import { adapterConfig, adapterWeights, type AdapterSpec } from "./helpers/lora-adapter.js";
import { startNatsServer, type NatsServer } from "./helpers/nats.js";

const POLICY = "bt";
const subj = subjects(POLICY);
const log = pino({ level: process.env.TEST_LOG ?? "silent" });

let server: NatsServer;
let nc: NatsConnection;
let js: JetStreamClient;
let store: ObjectStore;
let healthy: FakeVllm;
let failing: FakeVllm;
let dir: string;
const events: ReplicaEvent[] = [];
const waiters: Array<() => void> = [];

beforeAll(async () => {
  server = await startNatsServer();
  nc = await connect({ servers: server.url });
  js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: EVENT_STREAM, subjects: [...EVENT_STREAM_SUBJECTS] });
  store = await new Objm(js).create(ADAPTER_BUCKET);
  healthy = await startFakeVllm();
  failing = await startFakeVllm();
  failing.setUnavailable(true); // a replica that answers 503 to everything (down behind its proxy)
  dir = await mkdtemp(join(tmpdir(), "rlloop-reload-"));
  const sub = nc.subscribe(subj.replicas);
  void (async () => {
    for await (const msg of sub) {
      events.push(ReplicaEvent.parse(msg.json()));
      for (const wake of waiters.splice(0)) wake();
    }
  })();
});

afterAll(async () => {
  await nc?.drain();
  await healthy?.close();
  await failing?.close();
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

/** Resolves once `count` events for adapter `name` have arrived. */
async function eventsFor(name: string, count: number): Promise<ReplicaEvent[]> {
  for (;;) {
    const found = events.filter((e) => e.name === name);
    if (found.length >= count) return found;
    await new Promise<void>((wake) => waiters.push(wake));
  }
}

/** Resolves with the first event for adapter `name` from the given replica. */
async function eventOf(replica: FakeVllm, name: string): Promise<ReplicaEvent> {
  for (;;) {
    const found = events.find((e) => e.name === name && e.replica === replica.url);
    if (found) return found;
    await new Promise<void>((wake) => waiters.push(wake));
  }
}

const sha256 = (data: string | Uint8Array) => createHash("sha256").update(data).digest("hex");

/** Puts an adapter into the object store as the daemon does and announces it on rlloop.<policy>.adapter.published. */
async function publishAdapter(round: number, spec: AdapterSpec, tamper?: (a: AdapterPublished) => AdapterPublished): Promise<AdapterPublished> {
  const prefix = adapterObjectPrefix(POLICY, round);
  const contents = { "adapter_config.json": Buffer.from(adapterConfig(spec)), "adapter_model.safetensors": adapterWeights(spec) };
  const files = [];
  for (const [name, data] of Object.entries(contents)) {
    await store.putBlob({ name: `${prefix}/${name}` }, data);
    files.push({ name, object: `${prefix}/${name}`, sha256: sha256(data), size: data.length });
  }
  let announcement: AdapterPublished = {
    type: "adapter.published", policy: POLICY, round, name: adapterName(POLICY, round), path: `/daemon/rounds/${round}/adapter`,
    object: prefix, bucket: ADAPTER_BUCKET, sha256: sha256(contents["adapter_model.safetensors"]), files,
    stats: { pg_loss: 0.1, kl: 0.01, clip_frac: 0.05, logp_gap: 0.001, logp_gap_abs: 0.002, rows: 256, train_s: 30 },
    at: new Date().toISOString(),
  };
  if (tamper) announcement = tamper(announcement);
  await js.publish(subj.adapterPublished, JSON.stringify(announcement));
  return announcement;
}

function options(replicas: string[]): ReloaderOptions {
  return {
    policy: POLICY, replicas, dir, keep: 2, requestTimeoutMs: 5_000, apiKey: null, pruneLocal: true,
    retry: { retries: 3, minTimeoutMs: 5, maxTimeoutMs: 20 },
  };
}

describe("reload - two vLLM replicas, one failing", () => {
  let reloader: Reloader;

  test("round 1 loads on the healthy replica and fails on the other with vLLM's reason", async () => {
    const published = await publishAdapter(1, { r: 16, alpha: 32, fill: 0.1 });
    // a relative --dir: vLLM must still be sent the absolute path (it resolves relative ones against its own cwd)
    reloader = await startReloader(nc, { ...options([healthy.url, failing.url]), dir: relative(process.cwd(), dir) }, log);
    const [a, b] = await eventsFor("bt-r1", 2).then((found) => [found.find((e) => e.replica === healthy.url), found.find((e) => e.replica === failing.url)]);
    expect(a).toMatchObject({ type: "replica.loaded", policy: POLICY, name: "bt-r1" });
    expect(b).toMatchObject({ type: "replica.load_failed", name: "bt-r1" });
    expect(b?.type === "replica.load_failed" && b.reason).toContain("503");

    // the healthy replica got the verified local copy, by the versioned name, never in place
    const local = join(dir, POLICY, "r1");
    expect(healthy.loaded()).toEqual([expect.objectContaining({ name: "bt-r1", path: local })]);
    expect(sha256(await readFile(join(local, "adapter_model.safetensors")))).toBe(published.sha256);
    const loads = healthy.requests.filter((r) => r.path === "/v1/load_lora_adapter");
    expect(loads.map((r) => r.body)).toEqual([{ lora_name: "bt-r1", lora_path: local }]);
    // the failing replica was retried: 1 attempt + 3 retries
    expect(failing.requests.filter((r) => r.path === "/v1/load_lora_adapter")).toHaveLength(4);
  });

  test("transient 503s are retried until the load succeeds", async () => {
    healthy.failNextLoads(2);
    await publishAdapter(2, { r: 16, alpha: 32, fill: 0.2 });
    const found = await eventsFor("bt-r2", 2);
    expect(found.find((e) => e.replica === healthy.url)?.type).toBe("replica.loaded");
    const r2Loads = healthy.requests.filter((r) => r.path === "/v1/load_lora_adapter" && (r.body as { lora_name?: string }).lora_name === "bt-r2");
    expect(r2Loads.map((r) => r.status)).toEqual([503, 503, 200]);
    expect(healthy.loaded().map((l) => l.name)).toEqual(["bt-r1", "bt-r2"]);
  });

  test("with keep = 2, round 3 unloads round 1; once all replicas succeed, local copies beyond keep are pruned", async () => {
    failing.setUnavailable(false); // the second replica comes back
    await publishAdapter(3, { r: 16, alpha: 32, fill: 0.3 });
    const found = await eventsFor("bt-r3", 2);
    expect(found.map((e) => e.type)).toEqual(["replica.loaded", "replica.loaded"]);
    expect(healthy.loaded().map((l) => l.name)).toEqual(["bt-r2", "bt-r3"]);
    expect(failing.loaded().map((l) => l.name)).toEqual(["bt-r3"]);
    expect(healthy.requests.filter((r) => r.path === "/v1/unload_lora_adapter").map((r) => r.body)).toEqual([{ lora_name: "bt-r1" }]);
    expect((await readdir(join(dir, POLICY))).sort()).toEqual(["r2", "r3"]);
  });

  test("an adapter whose bytes differ from the announced sha256 is loaded nowhere", async () => {
    await publishAdapter(4, { r: 16, alpha: 32, fill: 0.4 }, (a) => {
      const wrong = "0".repeat(64);
      return { ...a, sha256: wrong, files: a.files.map((f) => (f.name === "adapter_model.safetensors" ? { ...f, sha256: wrong } : f)) };
    });
    const found = await eventsFor("bt-r4", 2);
    for (const e of found) {
      expect(e.type).toBe("replica.load_failed");
      expect(e.type === "replica.load_failed" && e.reason).toMatch(/sha256 [0-9a-f]{64} differs from the recorded 0{64}/);
    }
    expect(healthy.loaded().map((l) => l.name)).toEqual(["bt-r2", "bt-r3"]);
  });

  test("an adapter vLLM refuses (no rank in its config) fails at once with vLLM's message, without retries", async () => {
    const before = healthy.requests.length;
    await publishAdapter(5, { r: 16, alpha: 32, fill: 0.5, dropConfigKeys: ["r"] });
    const found = await eventsFor("bt-r5", 2);
    for (const e of found) expect(e.type === "replica.load_failed" && e.reason).toContain("Missing required configuration fields: {'r'}");
    const r5Loads = healthy.requests.slice(before).filter((r) => r.path === "/v1/load_lora_adapter");
    expect(r5Loads.map((r) => r.status)).toEqual([500]);
    await reloader.stop();
  });

  test("a restarted reloader starts from the last announcement; a name a replica holds counts as loaded", async () => {
    await publishAdapter(6, { r: 16, alpha: 32, fill: 0.6 });
    const first = await startReloader(nc, options([healthy.url]), log);
    await eventsFor("bt-r6", 1);
    await first.stop();
    const loadsBefore = healthy.requests.filter((r) => r.path === "/v1/load_lora_adapter").length;

    const second = await startReloader(nc, options([healthy.url]), log);
    const found = await eventsFor("bt-r6", 2);
    await second.stop();
    expect(found.map((e) => e.type)).toEqual(["replica.loaded", "replica.loaded"]);
    const loads = healthy.requests.filter((r) => r.path === "/v1/load_lora_adapter").slice(loadsBefore);
    // only round 6 was replayed (last per subject), and vLLM's "already loaded" answer was taken as success
    expect(loads.map((r) => [(r.body as { lora_name: string }).lora_name, r.status])).toEqual([["bt-r6", 400]]);
    expect(healthy.loaded().map((l) => l.name)).toEqual(["bt-r3", "bt-r6"]);
  });

  test("a replica that is down lags on its own: the others load each new adapter at once; back up, it skips superseded ones", async () => {
    failing.setUnavailable(true);
    // retries enough to outlast the test while down (no timing is asserted: the order of events is)
    const reloader = await startReloader(nc, { ...options([healthy.url, failing.url]), retry: { retries: 10_000, minTimeoutMs: 20, maxTimeoutMs: 20 } }, log);
    const healthyGot = async (name: string) => (await eventsFor(name, 1)).find((e) => e.replica === healthy.url);
    for (const round of [7, 8, 9]) {
      await publishAdapter(round, { r: 16, alpha: 32, fill: round / 10 });
      // loaded on the healthy replica while the other is still retrying an older announcement (the replayed r6)
      expect(await healthyGot(`bt-r${round}`)).toMatchObject({ type: "replica.loaded" });
    }
    expect(events.filter((e) => e.replica === failing.url && ["bt-r7", "bt-r8", "bt-r9"].includes(e.name))).toEqual([]);

    failing.setUnavailable(false);
    const r9 = await eventOf(failing, "bt-r9");
    expect(r9).toMatchObject({ type: "replica.loaded" });
    // r8 was queued behind the announcement it was retrying when it came back (r6 or r7, whichever its lane had
    // started): skipped; that one finished, loaded; any other older one was skipped too
    const r8 = await eventOf(failing, "bt-r8");
    expect(r8.type === "replica.load_failed" && r8.reason).toBe("superseded by round 9 before this replica got to it");
    const older = await Promise.all(["bt-r6", "bt-r7"].map((name) => eventOf(failing, name)));
    for (const e of older) {
      expect(e.type === "replica.loaded" || (e.type === "replica.load_failed" && /^superseded by round [789] /.test(e.reason))).toBe(true);
    }
    await reloader.stop();
    expect(failing.loaded().map((l) => l.name)).toContain("bt-r9");
  });

  test("a replica that was down does not skip to a newer announcement whose adapter could not be fetched", async () => {
    failing.setUnavailable(true);
    const reloader = await startReloader(nc, { ...options([healthy.url, failing.url]), retry: { retries: 10_000, minTimeoutMs: 20, maxTimeoutMs: 20 } }, log);
    await publishAdapter(10, { r: 16, alpha: 32, fill: 0.1 });
    expect((await eventsFor("bt-r10", 1)).find((e) => e.replica === healthy.url)).toMatchObject({ type: "replica.loaded" });
    await publishAdapter(11, { r: 16, alpha: 32, fill: 0.2 }, (a) => ({ ...a, sha256: "0".repeat(64), files: a.files.map((f) => (f.name === "adapter_model.safetensors" ? { ...f, sha256: "0".repeat(64) } : f)) }));
    expect((await eventsFor("bt-r11", 1)).find((e) => e.replica === healthy.url)).toMatchObject({ type: "replica.load_failed" });

    failing.setUnavailable(false);
    // round 11 cannot be loaded anywhere, so round 10 is not superseded: the replica loads it
    expect(await eventOf(failing, "bt-r10")).toMatchObject({ type: "replica.loaded" });
    const r11 = await eventOf(failing, "bt-r11");
    expect(r11.type === "replica.load_failed" && r11.reason).toMatch(/differs from the recorded 0{64}/);
    await reloader.stop();
  });

  test("a replica that restarts (forgetting its adapters) is given the newest one again by the periodic check", async () => {
    const replica = await startFakeVllm();
    const reloader = await startReloader(nc, { ...options([replica.url]), checkIntervalMs: 50 }, log);
    await publishAdapter(12, { r: 16, alpha: 32, fill: 0.3 });
    expect(await eventOf(replica, "bt-r12")).toMatchObject({ type: "replica.loaded" });
    const loadsBefore = replica.requests.filter((r) => r.path === "/v1/load_lora_adapter").length;
    replica.restart();
    expect(replica.loaded()).toEqual([]);
    const again = await eventsFor("bt-r12", 2).then((found) => found.filter((e) => e.replica === replica.url));
    expect(again.map((e) => e.type)).toEqual(["replica.loaded", "replica.loaded"]);
    expect(replica.loaded()).toEqual([expect.objectContaining({ name: "bt-r12", path: join(dir, POLICY, "r12") })]);
    expect(replica.requests.filter((r) => r.path === "/v1/load_lora_adapter")).toHaveLength(loadsBefore + 1);
    await reloader.stop();
    await replica.close();
  });

  test("a replica whose load of the newest adapter failed past its retries is given it by the periodic check, not left on the one before", async () => {
    const replica = await startFakeVllm();
    const reloader = await startReloader(nc, { ...options([replica.url]), checkIntervalMs: 50 }, log);
    expect(await eventOf(replica, "bt-r12")).toMatchObject({ type: "replica.loaded" }); // the last announcement, replayed
    replica.failNextLoads(4); // the first attempt and its 3 retries
    await publishAdapter(13, { r: 16, alpha: 32, fill: 0.4 });
    const found = await eventsFor("bt-r13", 2).then((all) => all.filter((e) => e.replica === replica.url));
    expect(found.map((e) => e.type)).toEqual(["replica.load_failed", "replica.loaded"]);
    expect(found[0]?.type === "replica.load_failed" && found[0].reason).toContain("503");
    expect(replica.loaded().map((l) => l.name)).toEqual(["bt-r12", "bt-r13"]);
    await reloader.stop();
    await replica.close();
  });
});
