// The operator tools around a real daemon (test-double trainer) on a real nats-server: `simulate` feeds a round,
// the daemon publishes its adapter, the reloader loads it on two fake vLLM replicas (one down), and `watch`
// shows the round with its statistics. Waits are on events, never on time.
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../src/loop/config/index.js";
import { Daemon } from "../src/loop/daemon.js";
import { startReloader } from "../src/tools/reload/reloader.js";
import { ReplicaEvent, subjects, type AdapterPublished } from "../src/contract/index.js";
import { publishRollouts, type SimulateOptions } from "../src/tools/sim/publisher.js";
import { renderWatch } from "../src/tools/watch/watch-view.js";
import { queryService } from "../src/tools/watch/watcher.js";
import { startFakeVllm, type FakeVllm } from "./helpers/fake-vllm.js";
import { CODE_LENGTH, POLICY, eventsOn, startLoopEnv, waitFor, type LoopEnv } from "./helpers/loop.js";

describe("ops - simulate → daemon → reload → watch", () => {
  let env: LoopEnv;
  let daemon: Daemon;
  let up: FakeVllm;
  let down: FakeVllm;

  beforeAll(async () => {
    env = await startLoopEnv();
    daemon = new Daemon({ config: parseConfig(env.config()) });
    await daemon.start();
    up = await startFakeVllm();
    down = await startFakeVllm();
    down.setUnavailable(true);
  });

  afterAll(async () => {
    await daemon?.stop();
    await up?.close();
    await down?.close();
    await env?.close();
  });

  it("a simulated round is trained, published, loaded on the healthy replica and shown by watch", async () => {
    // 8 one-step rollouts = round.rows of the test config: exactly one round
    const sim: SimulateOptions = {
      policy: POLICY, seed: 11, groupSize: 4, maxSteps: 1, codeLength: CODE_LENGTH, levels: 8, frame: { width: 160, height: 120 },
      adapter: { round: 0, name: `${POLICY}-r0` }, skill: { base: 0.35, perRound: 0.05 }, memoryBits: 2, runTag: "e2e",
      startMs: Date.UTC(2026, 0, 1), spacingMs: 0, count: 8, start: 0, rate: null, frameRoot: null,
    };
    expect(await publishRollouts(env.js, sim)).toMatchObject({ published: 8, rows: 8 });
    const [announcement] = await waitFor("round 1 published", async () => {
      const found = await eventsOn<AdapterPublished>(env.jsm, subjects(POLICY).adapters);
      return found.length === 1 ? found : null;
    });
    expect(announcement).toMatchObject({ round: 1, name: "bt-r1" });

    const reloader = await startReloader(env.nc, {
      policy: POLICY, replicas: [up.url, down.url], dir: `${env.dir}/reloader`, keep: 2, requestTimeoutMs: 5000, apiKey: null,
      pruneLocal: true, retry: { retries: 2, minTimeoutMs: 5, maxTimeoutMs: 10 },
    }, pino({ level: "silent" }));
    const reloads = await waitFor("both replicas' outcomes", async () => {
      const found = (await eventsOn(env.jsm, subjects(POLICY).replicas)).map((e) => ReplicaEvent.parse(e));
      return found.length === 2 ? found : null;
    });
    await reloader.stop();
    expect(reloads.find((e) => e.replica === up.url)).toMatchObject({ type: "replica.loaded", name: "bt-r1" });
    expect(reloads.find((e) => e.replica === down.url)).toMatchObject({ type: "replica.load_failed", name: "bt-r1" });
    expect(up.loaded().map((l) => l.name)).toEqual(["bt-r1"]);

    const state = await queryService(env.nc, { policy: POLICY, source: env.server.url, maxRounds: 5, requestTimeoutMs: 5000 });
    expect(state.notice).toBeNull();
    expect(state.stats).toMatchObject({ round: 1 });
    expect(state.rounds[0]).toMatchObject({ round: 1, rows: 8, status: "published" });
    const frame = renderWatch(state, { nowMs: Date.now(), width: 160, statsIntervalS: 1 });
    expect(frame).toContain("round     1 committed");
    expect(frame).toMatch(/\n {5}1 published +8 /);
  });
});
