// End to end against a real nats-server: three rounds closed by rows, trained (test-double trainer), committed,
// acked and published in order; each manifest lists exactly the events of its batch; the adapters are in the
// object store with the announced sha256; the consumer has nothing left pending.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Objm } from "@nats-io/obj";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../src/loop/config/index.js";
import { Daemon } from "../src/loop/daemon.js";
import { readManifest } from "../src/loop/manifest.js";
import { roundDir } from "../src/loop/paths.js";
import { ADAPTER_BUCKET, ROLLOUT_STREAM, consumerName, subjects, type AdapterPublished } from "../src/contract/index.js";
import { StateStore } from "../src/loop/state.js";
import { POLICY, eventsOn, makeRollout, publishRollouts, startLoopEnv, waitFor, type LoopEnv } from "./helpers/loop.js";

describe("loop - end to end", () => {
  let env: LoopEnv;
  let daemon: Daemon;

  beforeAll(async () => {
    env = await startLoopEnv();
    daemon = new Daemon({ config: parseConfig(env.config()) });
    await daemon.start();
  });

  afterAll(async () => {
    await daemon?.stop();
    await env?.close();
  });

  it("publishes three rounds in order, each manifest listing exactly its events", async () => {
    const batches: number[][] = [];
    for (let round = 1; round <= 3; round++) {
      // 4 rollouts x 2 steps = round.rows (8): the round closes on exactly this batch
      const rollouts = await Promise.all([0, 1, 2, 3].map((i) => makeRollout(`e2e-r${round}`, i, { steps: 2, adapterRound: round - 1, group: `g${round}-${i % 2}` })));
      batches.push(await publishRollouts(env.js, rollouts));
      await waitFor(`adapter of round ${round}`, async () => (await eventsOn<AdapterPublished>(env.jsm, subjects(POLICY).adapters)).length === round);
    }
    const adapters = await eventsOn<AdapterPublished>(env.jsm, subjects(POLICY).adapters);
    expect(adapters.map((a) => a.round)).toEqual([1, 2, 3]);
    expect(adapters.map((a) => a.name)).toEqual(["bt-r1", "bt-r2", "bt-r3"]);

    for (let round = 1; round <= 3; round++) {
      const manifest = await readManifest(roundDir(env.workDir, POLICY, round));
      expect(manifest?.status).toBe("committed");
      expect(manifest?.outcome).toBe("published");
      expect(manifest?.events.map((e) => e.seq)).toEqual(batches[round - 1]);
      expect(manifest?.events.map((e) => e.id)).toEqual([0, 1, 2, 3].map((i) => `e2e-r${round}-${i}`));
      const train = readFileSync(join(roundDir(env.workDir, POLICY, round), "train.jsonl"), "utf8");
      expect(createHash("sha256").update(train).digest("hex")).toBe(manifest?.train_sha256);
      const rows = train.trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(rows).toHaveLength(8);
      expect(Object.keys(rows[0] as object)).toEqual(["image", "name", "code", "adv", "vllm_logp", "memory"]);
    }

    const state = await (await StateStore.open(env.nc, POLICY, 1)).read();
    expect(state?.record.round).toBe(3);
    expect(state?.record.adapter.round).toBe(3);

    const store = await new Objm(env.nc).open(ADAPTER_BUCKET);
    for (const a of adapters) {
      const model = a.files.find((f) => f.name === "adapter_model.safetensors");
      const blob = await store.getBlob(model?.object ?? "");
      expect(createHash("sha256").update(blob ?? new Uint8Array()).digest("hex")).toBe(a.sha256);
    }

    const consumer = await waitFor("all acks", async () => {
      const info = await env.jsm.consumers.info(ROLLOUT_STREAM, consumerName(POLICY));
      return info.num_ack_pending === 0 && info.num_pending === 0 ? info : null;
    });
    expect(consumer.ack_floor.stream_seq).toBe(batches[2]?.at(-1));
  });
});
