// Bad input: every malformed or unacceptable rollout is rejected with its specific reason on
// rlloop.<policy>.rejected, terminated, and the daemon keeps running (a valid round still publishes afterwards).
// Cases: the simulator's bad-event table (src/loop/sim/bad-events.ts) plus stale adapter, duplicate id, and
// frames by path (missing, oversized, corrupt, symlink escaping the root) and by object (missing, corrupt chunks,
// data gone whole or in part, present).
import { mkdirSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Objm } from "@nats-io/obj";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../src/loop/config/index.js";
import { Daemon } from "../src/loop/daemon.js";
import { incomingDir } from "../src/loop/paths.js";
import { MAX_REJECTION_MESSAGE_CHARS, ROLLOUT_STREAM, consumerName, subjects, type AdapterPublished, type RejectReason, type RolloutCompletedInput } from "../src/contract/index.js";
import { badEvents } from "../src/tools/sim/bad-events.js";
import { bytesStream, CODE_LENGTH, POLICY, eventsOn, makeRollout, publishRollouts, startLoopEnv, testFrame, waitFor, type LoopEnv } from "./helpers/loop.js";

const FRAMES_BUCKET = "test-frames";

describe("loop - rejects bad input with a specific reason", () => {
  let env: LoopEnv;
  let daemon: Daemon;

  beforeAll(async () => {
    env = await startLoopEnv();
    daemon = new Daemon({ config: parseConfig(env.config({ offPolicy: { maxStaleness: 0 }, frames: { roots: [env.framesRoot], maxBytes: 200_000, maxPixels: 100_000, objectBucket: FRAMES_BUCKET } })) });
    await daemon.start();
  });

  afterAll(async () => {
    await daemon?.stop();
    await env?.close();
  });

  const rejectedReasons = async () => new Map((await eventsOn<{ id: string | null; reason: RejectReason; seq: number; message: string }>(env.jsm, subjects(POLICY).rejected)).map((e) => [e.seq, e]));

  it("records each bad event with its reason, and still publishes a valid round", async () => {
    // round 1 with valid rollouts, so that adapter round 0 becomes stale (maxStaleness 0)
    await publishRollouts(env.js, await Promise.all([0, 1, 2, 3].map((i) => makeRollout("ok1", i, { steps: 2 }))));
    await waitFor("round 1 published", async () => (await eventsOn(env.jsm, subjects(POLICY).adapters)).length === 1);

    const valid = await makeRollout("valid", 0, { steps: 1, adapterRound: 1 });
    const table = await badEvents({ valid, runTag: "bad", codeLength: CODE_LENGTH, maxSteps: 8, maxPixels: 100_000, frameRoot: env.framesRoot });
    // stream sequence → [label, expected reason] (malformed payloads have no id to key by)
    const expected = new Map<number, [string, RejectReason]>();
    const publishRaw = async (id: string, payload: Uint8Array | string, reason: RejectReason, msgID = id) => {
      const ack = await env.js.publish(subjects(POLICY).rollouts, payload, { msgID });
      expected.set(ack.seq, [id, reason]);
    };
    for (const bad of table) await publishRaw(bad.id, bad.payload, bad.expect);

    const step = (image: RolloutCompletedInput["steps"][number]["image"]) => ({ ...(valid.steps[0] as RolloutCompletedInput["steps"][number]), image });
    const own = async (id: string, reason: RejectReason, patch: Partial<RolloutCompletedInput>) =>
      publishRaw(id, JSON.stringify({ ...valid, id, ...patch }), reason);
    await own("stale", "stale_adapter", { adapter: { round: 0, name: "bt-r0" } });
    await own("wrong-sha", "adapter_mismatch", { adapter: { round: 1, name: "bt-r1", sha256: "0".repeat(64) } });
    writeFileSync(join(env.framesRoot, "big.png"), Buffer.alloc(300_000, 1));
    await own("path-oversized", "image_too_large", { steps: [step({ path: join(env.framesRoot, "big.png") })] });
    const png = await testFrame();
    writeFileSync(join(env.framesRoot, "corrupt.png"), Buffer.concat([png.subarray(0, 40), Buffer.alloc(200, 7)]));
    await own("path-corrupt", "image_corrupt", { steps: [step({ path: "corrupt.png" })] });
    mkdirSync(join(env.framesRoot, "links"), { recursive: true });
    symlinkSync("/etc/hostname", join(env.framesRoot, "links", "escape.png"));
    await own("symlink-escape", "image_outside_roots", { steps: [step({ path: join(env.framesRoot, "links", "escape.png") })] });
    // an object whose chunks no longer hash to its digest (a second chunk appended behind the store's back)
    const objects = await new Objm(env.nc).create(FRAMES_BUCKET);
    const tampered = await objects.putBlob({ name: "frames/tampered.png" }, png);
    await env.js.publish(`$O.${FRAMES_BUCKET}.C.${tampered.nuid}`, Buffer.alloc(16, 1));
    await own("object-corrupt", "image_corrupt", { steps: [step({ object: "frames/tampered.png" })] });
    await own("object-missing", "image_missing", { steps: [step({ object: "no/such/frame.png" })] });
    // objects whose data is gone from the store while their metadata stays (a worker's put that failed after its
    // metadata landed: the client purges the chunks; a bucket's limits evicting the oldest messages, chunks first):
    // all of it, or one chunk of several; the client would wait for those chunks for ever
    const chunkless = await objects.putBlob({ name: "frames/chunkless.png" }, png);
    await env.jsm.streams.purge(`OBJ_${FRAMES_BUCKET}`, { filter: `$O.${FRAMES_BUCKET}.C.${chunkless.nuid}` });
    // more of them than intake judges at once (4): each one held its judgement for ever, so these stopped the stream
    for (let i = 0; i < 5; i++) await own(`object-chunkless-${i}`, "image_missing", { steps: [step({ object: "frames/chunkless.png" })] });
    const lastBefore = (await env.jsm.streams.info(`OBJ_${FRAMES_BUCKET}`)).state.last_seq;
    const holed = await objects.put({ name: "frames/holed.png", options: { max_chunk_size: 64 } }, bytesStream(png));
    expect(holed.chunks).toBeGreaterThan(2);
    await env.jsm.streams.deleteMessage(`OBJ_${FRAMES_BUCKET}`, lastBefore + 1); // its first chunk
    await own("object-chunk-evicted", "image_missing", { steps: [step({ object: "frames/holed.png" })] });
    await own("second-step-corrupt", "image_corrupt", { steps: [step({ png_base64: png.toString("base64") }), step({ path: "corrupt.png" })] });
    await own("unknown-adapter", "unknown_adapter", { adapter: { round: 7, name: "bt-r7" } });
    // same rollout id under a second message id: the stream keeps both, the daemon must count it once. The second
    // copy waits while the first is in the open round (that round could yet reject it), and is a duplicate once the
    // round trains it
    const dup = await makeRollout("dup", 0, { steps: 1, adapterRound: 1 });
    await publishRollouts(env.js, [dup]);
    const dupAgain = (await env.js.publish(subjects(POLICY).rollouts, JSON.stringify(dup), { msgID: "dup-0-again" })).seq;

    const found = await waitFor("all rejections recorded", async () => {
      const got = await rejectedReasons();
      return [...expected.keys()].every((id) => got.has(id)) ? got : null;
    }).catch(async (err: Error) => {
      const got = await rejectedReasons();
      throw new Error(`${err.message}; missing: ${[...expected].filter(([seq]) => !got.has(seq)).map(([, [id]]) => id).join(", ")}`);
    });
    const mismatches = [...expected]
      .filter(([seq, [, reason]]) => found.get(seq)?.reason !== reason)
      .map(([seq, [id, reason]]) => `${id}: expected ${reason}, got ${found.get(seq)?.reason} (${found.get(seq)?.message})`);
    expect(mismatches).toEqual([]);
    expect(expected.size).toBe(table.length + 15);
    expect(found.has(dupAgain)).toBe(false);
    for (const [seq] of expected) expect(found.get(seq)?.message.length).toBeGreaterThan(10);

    // a frame from the object store is accepted; with dup-0 (1 row) and 3 more rows round 2 closes
    await objects.putBlob({ name: "frames/ok.png" }, png);
    const good = await makeRollout("ok2", 0, { steps: 3, adapterRound: 1 });
    good.steps = good.steps.map((s) => ({ ...s, image: { object: "frames/ok.png" } }));
    await publishRollouts(env.js, [good, ...(await Promise.all([1, 2].map((i) => makeRollout("ok2", i, { steps: 2, adapterRound: 1 }))))]);
    const adapters = await waitFor("round 2 published", async () => {
      const list = await eventsOn<AdapterPublished>(env.jsm, subjects(POLICY).adapters);
      return list.length === 2 ? list : null;
    });
    expect(adapters.map((a) => a.round)).toEqual([1, 2]);
    const dupRejected = await waitFor("the copy of dup-0 rejected once its round trained the first", async () => (await rejectedReasons()).get(dupAgain), 330_000); // backoff up to 5 min
    expect(dupRejected).toMatchObject({ id: "dup-0", reason: "duplicate_id" });
    expect(dupRejected.message).toContain("consumed by a committed round");
    const info = await waitFor("nothing pending", async () => {
      const i = await env.jsm.consumers.info(ROLLOUT_STREAM, consumerName(POLICY));
      return i.num_ack_pending === 0 && i.num_pending === 0 ? i : null;
    }).catch(async (err: Error) => {
      throw new Error(`${err.message}: ${JSON.stringify(await env.jsm.consumers.info(ROLLOUT_STREAM, consumerName(POLICY)))} ${JSON.stringify(daemon.snapshot())}`);
    });
    expect(info.num_redelivered).toBe(0);
    // frames of rejected rollouts (some steps decoded before another failed) are not left behind
    expect(readdirSync(incomingDir(env.workDir, POLICY))).toEqual([]);
  });

  it("records the rejection of a rollout as large as the server takes, whose message would quote more than that", async () => {
    const valid = await makeRollout("huge", 0, { steps: 1, adapterRound: 2 });
    const room = (env.nc.info?.max_payload ?? 1024 * 1024) - 4096; // its headers (Nats-Msg-Id) count too
    // many unknown keys in a strict object: zod's message names each one, quoted (escaped again in the event)
    const keys: Record<string, number> = {};
    for (let i = 0, size = Buffer.byteLength(JSON.stringify(valid)) + 32; size < room; i++) {
      keys[`k${i}`] = 0;
      size += `"k${i}":0,`.length;
    }
    const manyKeys = JSON.stringify({ ...valid, id: "huge-keys", adapter: { ...valid.adapter, ...keys } });
    // one unknown top-level key as long as the payload allows, escaped characters included
    const longKey = JSON.stringify({ ...valid, id: "huge-meta", ["\"".repeat(Math.floor((room - 4096) / 2))]: 0 });
    const seqs = new Map<number, RejectReason>();
    for (const [payload, reason] of [[manyKeys, "invalid_schema"], [longKey, "meta_too_large"]] as const) {
      expect(Buffer.byteLength(payload)).toBeLessThan(room);
      seqs.set((await env.js.publish(subjects(POLICY).rollouts, payload)).seq, reason);
    }
    const found = await waitFor("both rejections recorded", async () => {
      const got = await rejectedReasons();
      return [...seqs.keys()].every((seq) => got.has(seq)) ? got : null;
    });
    for (const [seq, reason] of seqs) {
      const event = found.get(seq)!;
      expect(event.reason).toBe(reason);
      expect(event.message.length).toBeLessThanOrEqual(MAX_REJECTION_MESSAGE_CHARS);
    }
    expect(found.get([...seqs.keys()][0]!)!.message).toMatch(/… \(\d+ characters\)$/);
    // recorded at their first judgement: nothing waits, nothing was redelivered, intake stayed healthy
    const info = await waitFor("nothing pending", async () => {
      const i = await env.jsm.consumers.info(ROLLOUT_STREAM, consumerName(POLICY));
      return i.num_ack_pending === 0 && i.num_pending === 0 ? i : null;
    });
    expect(info.num_redelivered).toBe(0);
    expect(daemon.snapshot().health.status).toBe("ok");
  });
});
