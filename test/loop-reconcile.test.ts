// Reconcile, don't just create (src/loop/reconcile.ts, buckets.ts, intake.ts): on a real nats-server, the streams,
// the KV buckets, the object store and the consumer the daemon owns are brought back to the config when it changed or
// someone changed them — each change named in one log line — and a change the server refuses is a ConfigError that
// says which resource and why. Errors are recognised by JetStream API codes (a missing frames bucket).
import { mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nanos } from "@nats-io/nats-core";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADAPTER_BUCKET, EVENT_STREAM, IDS_BUCKET, ROLLOUT_STREAM, STATE_BUCKET, consumerName, subjects } from "../src/contract/index.js";
import { openAdapterBucket, openIdsBucket, openStateBucket } from "../src/loop/buckets.js";
import { parseConfig } from "../src/loop/config/index.js";
import { ensureStreams } from "../src/loop/connection.js";
import { ConfigError, HostFaultError, isTransient, RolloutRejectedError } from "../src/loop/errors.js";
import { frameObjectOpener } from "../src/loop/frame-objects.js";
import { FrameRoots } from "../src/loop/frame-roots.js";
import { frameBytes } from "../src/loop/frames.js";
import { Intake } from "../src/loop/intake.js";
import { POLICY, startLoopEnv, type LoopEnv } from "./helpers/loop.js";
import { launchServer } from "./helpers/nats-configured.js";
import { connect } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { ROLLOUT_STREAM_SUBJECTS, EVENT_STREAM_SUBJECTS } from "../src/contract/index.js";

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const log = pino({ level: "info" }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) });
  return { log, messages: () => lines.map((l) => String(l.msg)) };
}

describe("loop - the daemon's JetStream resources are reconciled to the config", () => {
  let env: LoopEnv;
  beforeAll(async () => {
    env = await startLoopEnv();
  });
  afterAll(async () => env?.close());

  it("streams: a changed age limit and duplicate window are applied, with one line naming them", async () => {
    const { log, messages } = capture();
    await ensureStreams(env.jsm, parseConfig({ stream: { maxAgeS: 3600, duplicateWindowS: 60 } }).stream, log);
    const info = await env.jsm.streams.info(ROLLOUT_STREAM);
    expect(info.config.max_age).toBe(nanos(3600_000));
    expect(info.config.duplicate_window).toBe(nanos(60_000));
    expect(messages()).toContain(`stream ${ROLLOUT_STREAM} updated to the config: max_age 2592000s → 3600s, duplicate_window 600s → 60s`);
    await ensureStreams(env.jsm, parseConfig({}).stream, log);
  });

  it("streams: a count or byte limit someone set (it would drop rollouts not yet handled) is taken back, with one line naming it", async () => {
    const { log, messages } = capture();
    await env.jsm.streams.update(ROLLOUT_STREAM, { max_bytes: 1_000_000, max_msgs_per_subject: 5 });
    await env.jsm.streams.update(EVENT_STREAM, { max_msgs: 100 });
    await ensureStreams(env.jsm, parseConfig({}).stream, log);
    const [rollouts, events] = await Promise.all([ROLLOUT_STREAM, EVENT_STREAM].map((name) => env.jsm.streams.info(name)));
    expect([rollouts!.config.max_bytes, rollouts!.config.max_msgs_per_subject, events!.config.max_msgs]).toEqual([-1, -1, -1]);
    expect(messages()).toContain(`stream ${ROLLOUT_STREAM} updated to the config: max_bytes 1000000 → -1, max_msgs_per_subject 5 → -1`);
    expect(messages()).toContain(`stream ${EVENT_STREAM} updated to the config: max_msgs 100 → -1`);
    // as the daemon made them: nothing to change
    await ensureStreams(env.jsm, parseConfig({}).stream, log);
    expect(messages()).toHaveLength(2);
  });

  it("KV buckets and the object store: TTL, history and TTL support come back to the config", async () => {
    const { log, messages } = capture();
    await openIdsBucket(env.nc, 3600, { replicas: 1, log });
    await openIdsBucket(env.nc, 60, { replicas: 1, log });
    const ids = await env.jsm.streams.info(`KV_${IDS_BUCKET}`);
    expect(ids.config.max_age).toBe(nanos(60_000));
    expect(ids.config.duplicate_window).toBe(nanos(60_000));
    expect(messages()).toContain(`KV bucket ${IDS_BUCKET} updated to the config: max_age 3600s → 60s, duplicate_window 120s → 60s`);

    await openStateBucket(env.nc, { replicas: 1, log });
    expect((await env.jsm.streams.info(`KV_${STATE_BUCKET}`)).config.allow_msg_ttl).toBe(true);
    await env.jsm.streams.update(`KV_${STATE_BUCKET}`, { max_msgs_per_subject: 2 });
    await openStateBucket(env.nc, { replicas: 1, log });
    expect((await env.jsm.streams.info(`KV_${STATE_BUCKET}`)).config.max_msgs_per_subject).toBe(8);
    expect(messages()).toContain(`KV bucket ${STATE_BUCKET} updated to the config: max_msgs_per_subject 2 → 8`);

    await openAdapterBucket(env.nc, { replicas: 1, log });
    expect((await env.jsm.streams.info(`OBJ_${ADAPTER_BUCKET}`)).config.num_replicas).toBe(1);
  });

  it("the consumer: ack wait, max ack pending, max deliver and filter subjects come back to the config", async () => {
    const { log, messages } = capture();
    const config = parseConfig(env.config({ consumer: { ackWaitS: 2, fetchBatch: 32 } }));
    const intake = (ackWaitS: number) => new Intake(env.js, env.jsm, { policy: POLICY, consumer: { ...config.consumer, ackWaitS }, round: config.round, startSeq: () => 1 }, log);
    await intake(2).ensureConsumer();
    await env.jsm.consumers.update(ROLLOUT_STREAM, consumerName(POLICY), { filter_subjects: [subjects("other").rollouts], max_deliver: 5 });
    await intake(5).ensureConsumer();
    const info = await env.jsm.consumers.info(ROLLOUT_STREAM, consumerName(POLICY));
    expect(info.config.ack_wait).toBe(nanos(5000));
    expect(info.config.filter_subject ?? info.config.filter_subjects?.[0]).toBe(subjects(POLICY).rollouts);
    expect(info.config.max_deliver).toBe(-1); // a good rollout is never left undelivered for how often it was delivered
    expect(messages()).toContain(`consumer ${consumerName(POLICY)} updated to the config: ack_wait, max_deliver, filter_subjects`);
    await env.jsm.consumers.delete(ROLLOUT_STREAM, consumerName(POLICY));
  });

  it("a stop() while the consumer is being opened ends its messages instead of leaving them waiting", async () => {
    const config = parseConfig(env.config({}));
    const intake = new Intake(env.js, env.jsm, { policy: POLICY, consumer: config.consumer, round: config.round, startSeq: () => 1 }, pino({ level: "silent" }));
    const messages = intake.messages();
    const first = messages.next(); // opening the consumer: no message in the stream to end the wait
    await intake.stop();
    expect(await first).toEqual({ done: true, value: undefined });
    await env.jsm.consumers.delete(ROLLOUT_STREAM, consumerName(POLICY));
  });

  it("a change the server refuses is a ConfigError naming the resource and the server's reason", async () => {
    // another stream took the events stream's subjects
    await env.jsm.streams.delete(EVENT_STREAM);
    await env.jsm.streams.add({ name: "INTRUDER", subjects: ["rlloop.*.adapter.>"] });
    const refusedStream = await ensureStreams(env.jsm, parseConfig({}).stream).catch((e: Error) => e);
    expect(refusedStream).toBeInstanceOf(ConfigError);
    expect((refusedStream as Error).message).toMatch(new RegExp(`^stream ${EVENT_STREAM}: the server refused to create it: .*\\(JetStream error \\d+\\)$`));
    await env.jsm.streams.delete("INTRUDER");
    await ensureStreams(env.jsm, parseConfig({}).stream);
    // replicas without a cluster (nats-server 2.11 accepts and ignores them)
    if (!env.nc.info?.version.startsWith("2.11.")) {
      const refusedBucket = await openAdapterBucket(env.nc, { replicas: 3 }).catch((e: Error) => e);
      expect(refusedBucket).toBeInstanceOf(ConfigError);
      expect((refusedBucket as Error).message).toMatch(new RegExp(`^object store ${ADAPTER_BUCKET}: the server refused to change num_replicas 1 → 3: .*\\(JetStream error \\d+\\)$`));
    }
    // an even replica count is refused by the config already
    expect(() => parseConfig({ stream: { replicas: 2 } })).toThrow(/'stream.replicas' must be 1, 3 or 5/);
  });

  it("a frame from a frames bucket that does not exist is the configuration's fault, judged again later, not image_missing (told by the API code, not the message)", async () => {
    const limits = { roots: new FrameRoots([]), maxBytes: 1 << 20, maxPixels: 1 << 20, objects: frameObjectOpener(env.nc, "no-such-frames") };
    const err = await frameBytes({ object: "f.png" }, limits).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HostFaultError);
    expect(isTransient(err)).toBe(true);
    expect((err as Error).message).toMatch(/the frames object store does not exist \(frames.objectBucket\)/);
  });

  it("a frame under a root that is not there now (an unmounted share) is the host's fault, judged again later", async () => {
    const root = join(tmpdir(), `rlloop-gone-root-${process.pid}`);
    const limits = { roots: new FrameRoots([root]), maxBytes: 1 << 20, maxPixels: 1 << 20, objects: null };
    const err = await frameBytes({ path: join(root, "cam", "f.png") }, limits).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HostFaultError);
    expect(isTransient(err)).toBe(true);
    // with the root there, a missing file is the rollout's
    mkdirSync(root, { recursive: true });
    try {
      const missing = await frameBytes({ path: join(root, "cam", "f.png") }, limits).catch((e: unknown) => e);
      expect((missing as RolloutRejectedError).reason).toBe("image_missing");
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe("loop - an account that requires byte limits on its streams", () => {
  it("keeps the limits the operator set (the server refuses to lift them), warning what they risk; the start goes on", async () => {
    const dir = join(tmpdir(), `rlloop-required-${process.pid}`);
    mkdirSync(dir, { recursive: true });
    const server = await launchServer(dir, `listen: 127.0.0.1:-1\nhttp: 127.0.0.1:-1\njetstream { store_dir: ${JSON.stringify(join(dir, "store"))} }\n` +
      "accounts { APP { jetstream { max_file: 1G, max_mem: 64M, max_bytes_required: true }, users: [{ user: app, password: secret }] } }", { healthy: true });
    const nc = await connect({ servers: `nats://127.0.0.1:${server.ports.client}`, user: "app", pass: "secret" });
    try {
      const jsm = await jetstreamManager(nc);
      // as the operator made them: the account refuses a stream without max_bytes
      await jsm.streams.add({ name: ROLLOUT_STREAM, subjects: [...ROLLOUT_STREAM_SUBJECTS], max_bytes: 100_000_000 });
      await jsm.streams.add({ name: EVENT_STREAM, subjects: [...EVENT_STREAM_SUBJECTS], max_bytes: 10_000_000 });
      const { log, messages } = capture();
      await ensureStreams(jsm, parseConfig({}).stream, log);
      expect((await jsm.streams.info(ROLLOUT_STREAM)).config.max_bytes).toBe(100_000_000);
      expect(messages()).toContain(`stream ${ROLLOUT_STREAM} keeps its count or byte limits (the server refused to lift them): a message not handled before they are reached is dropped without a record`);
      expect((await jsm.streams.info(ROLLOUT_STREAM)).config.max_age).toBe(nanos(30 * 86400 * 1000)); // the rest reconciled
    } finally {
      await nc.close();
      await server.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
