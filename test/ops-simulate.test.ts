// The simulator: deterministic, schema-valid rollouts whose frames are real PNGs the daemon accepts, log-probs that
// are exact for the simulated sampler, rewards with learnable signal; the malformed-event table matches the
// daemon's own validation; publishing uses the rollout id as Nats-Msg-Id against a real nats-server.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstream, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import { connect } from "@nats-io/transport-node";
import sharp from "sharp";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { parseConfig } from "../src/loop/config/index.js";
import { ensureStreams } from "../src/loop/connection.js";
import { RolloutRejectedError } from "../src/loop/errors.js";
import { FrameRoots } from "../src/loop/frame-roots.js";
import { frameBytes, reencode, type FrameLimits } from "../src/loop/frames.js";
import { ROLLOUT_STREAM, subjects, type RolloutCompletedInput } from "../src/contract/index.js";
import { badEvents } from "../src/tools/sim/bad-events.js";
import { frameStore } from "../src/tools/sim/frame-store.js";
import { publishRollouts, type SimulateOptions } from "../src/tools/sim/publisher.js";
import { buildRollout, skillAt, type RolloutOptions } from "../src/tools/sim/rollout.js";
import { scenario, targetCode } from "../src/tools/sim/scenario.js";
import { checkAdapter } from "../src/loop/staleness.js";
import { parseRollout } from "../src/loop/validate.js";
import { startNatsServer, type NatsServer } from "./helpers/nats.js";

const base: RolloutOptions = {
  policy: "bt", seed: 7, groupSize: 4, maxSteps: 3, codeLength: 6, levels: 8, frame: { width: 640, height: 480 },
  adapter: { round: 0, name: "bt-r0" }, skill: { base: 0.35, perRound: 0.05 }, memoryBits: 4, runTag: "t",
  startMs: Date.UTC(2026, 0, 1), spacingMs: 100,
};
const inline = { kind: "inline" } as const;
const REPO = join(import.meta.dirname, "..");
const daemonContext = { policy: "bt", codeLength: 6, maxSteps: 64, limits: parseConfig({}).limits };

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "rlloop-sim-"));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const limits = (): FrameLimits => ({ roots: new FrameRoots([root]), maxBytes: 16 << 20, maxPixels: 4096 * 4096, objects: null });

describe("simulate - rollouts", () => {
  test("the same seed and index give the same event; another seed gives another", async () => {
    const a = await buildRollout(base, 5, inline);
    const b = await buildRollout(base, 5, inline);
    const c = await buildRollout({ ...base, seed: 8 }, 5, inline);
    expect(b).toEqual(a);
    expect(c.steps[0]?.image).not.toEqual(a.steps[0]?.image);
  });

  test("events pass the daemon's validation and their frames are real 640x480 PNGs, inline and by path", async () => {
    const store = frameStore(root);
    for (const sink of [inline, { kind: "path" as const, store }]) {
      for (let i = 0; i < 8; i++) {
        const event = await buildRollout(base, i, sink);
        const rollout = parseRollout(new TextEncoder().encode(JSON.stringify(event)), daemonContext);
        expect(rollout.steps.length).toBeGreaterThanOrEqual(1);
        expect(rollout.steps.length).toBeLessThanOrEqual(base.maxSteps);
        for (const step of rollout.steps) {
          if (sink.kind === "path") expect("path" in step.image && step.image.path.startsWith(root)).toBe(true);
          const png = await reencode(await frameBytes(step.image, limits()), limits());
          expect(await sharp(png).metadata()).toMatchObject({ format: "png", width: 640, height: 480 });
          expect(step.code).toMatch(/^[0-7]{6}$/);
          expect(step.memory?.every((bits) => /^[01]{4}$/.test(bits))).toBe(true);
        }
      }
    }
  });

  test("a group is one scenario: same name and group id, members differ in their codes", async () => {
    const members = await Promise.all([0, 1, 2, 3].map((i) => buildRollout(base, 8 + i, inline)));
    expect(new Set(members.map((m) => m.group))).toEqual(new Set(["t-g000002"]));
    expect(new Set(members.map((m) => m.steps[0]?.name)).size).toBe(1);
    expect(new Set(members.map((m) => m.steps.map((s) => s.code).join())).size).toBeGreaterThan(1);
    expect(members.map((m) => m.id)).toEqual(["t-g000002-m0", "t-g000002-m1", "t-g000002-m2", "t-g000002-m3"]);
  });

  test("vllm_logp is the exact log-probability of the sampled code under the simulated sampler (1e-12)", async () => {
    const q = skillAt(base, 0);
    for (let i = 0; i < 12; i++) {
      const event = await buildRollout(base, i, inline);
      const sc = scenario(base.seed, Math.floor(i / base.groupSize));
      event.steps.forEach((step, t) => {
        const right = targetCode(sc, t, base.codeLength, base.levels);
        let expected = 0;
        for (let d = 0; d < right.length; d++) expected += step.code[d] === right[d] ? Math.log(q) : Math.log((1 - q) / (base.levels - 1));
        expect(Math.abs(step.vllm_logp - expected)).toBeLessThan(1e-12);
        expect(step.vllm_logp).toBeLessThanOrEqual(0);
      });
    }
  });

  test("rewards carry signal: they rise with the right digits, and a later adapter earns more", async () => {
    const rewards = async (round: number) => {
      const events = await Promise.all(Array.from({ length: 48 }, (_, i) => buildRollout({ ...base, frame: { width: 64, height: 48 }, adapter: { round, name: `bt-r${round}` } }, i, inline)));
      return events;
    };
    const early = await rewards(0);
    const late = await rewards(10);
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    // expected per-step reward = q (the chance of each right digit): 0.35 at round 0, 0.85 at round 10; noise sd 0.05
    expect(mean(early.map((e) => e.reward))).toBeGreaterThan(0.2);
    expect(mean(early.map((e) => e.reward))).toBeLessThan(0.5);
    expect(mean(late.map((e) => e.reward))).toBeGreaterThan(0.7);
    // per step: reward tracks the fraction of right digits, which is what a policy can learn from the frame
    const pairs = early.flatMap((e, i) => e.steps.map((s, t) => {
      const right = targetCode(scenario(base.seed, Math.floor(i / base.groupSize)), t, base.codeLength, base.levels);
      return [[...s.code].filter((d, k) => d === right[k]).length / base.codeLength, s.reward ?? 0] as const;
    }));
    expect(correlation(pairs)).toBeGreaterThan(0.9);
  });
});

function correlation(pairs: ReadonlyArray<readonly [number, number]>): number {
  const n = pairs.length;
  const mx = pairs.reduce((a, [x]) => a + x, 0) / n;
  const my = pairs.reduce((a, [, y]) => a + y, 0) / n;
  let sxy = 0, sxx = 0, syy = 0;
  for (const [x, y] of pairs) {
    sxy += (x - mx) * (y - my);
    sxx += (x - mx) ** 2;
    syy += (y - my) ** 2;
  }
  return sxy / Math.sqrt(sxx * syy);
}

describe("simulate - the malformed-event table", () => {
  test("each case is refused by the daemon's own checks with the reason the table promises", async () => {
    const valid = await buildRollout(base, 0, inline);
    const cases = await badEvents({ valid, runTag: "t", codeLength: 6, maxSteps: 64, maxPixels: 4096 * 4096, frameRoot: root });
    expect(new Set(cases.map((c) => c.id)).size).toBe(cases.length);
    const state = { adapter: { round: 0 }, recent_adapters: [], unpublished: [] } as unknown as Parameters<typeof checkAdapter>[1];
    for (const c of cases) {
      const reason = await rejectionOf(c.payload, state);
      expect([c.label, reason]).toEqual([c.label, c.expect]);
    }
  });
});

/** The reason the daemon's checks give, in the order intake applies them: schema, adapter, frames. */
async function rejectionOf(payload: Uint8Array, state: Parameters<typeof checkAdapter>[1]): Promise<string | null> {
  try {
    const rollout = parseRollout(payload, daemonContext);
    checkAdapter(rollout.adapter, state, 1, Number.MAX_SAFE_INTEGER); // published after every adapter announced
    for (const step of rollout.steps) await reencode(await frameBytes(step.image, limits()), limits());
    return null;
  } catch (err) {
    if (err instanceof RolloutRejectedError) return err.reason;
    throw err;
  }
}

describe("simulate - publishing to JetStream", () => {
  let server: NatsServer;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await connect({ servers: server.url });
    jsm = await jetstreamManager(nc);
    await ensureStreams(jsm, parseConfig({}).stream);
  });
  afterAll(async () => {
    await nc?.drain();
    await server?.stop();
  });

  test("each rollout lands on rlloop.<policy>.rollouts with Nats-Msg-Id = id; a rerun is all duplicates", async () => {
    const opts: SimulateOptions = { ...base, frame: { width: 160, height: 120 }, count: 6, start: 0, rate: null, frameRoot: null };
    const published: string[] = [];
    const first = await publishRollouts(jetstream(nc), opts, { onPublished: (r) => published.push(r.id) });
    expect(first).toMatchObject({ published: 6, duplicates: 0, firstSeq: 1, lastSeq: 6 });
    for (let seq = 1; seq <= 6; seq++) {
      const msg = await jsm.streams.getMessage(ROLLOUT_STREAM, { seq });
      const event = msg?.json<RolloutCompletedInput>();
      expect(msg?.subject).toBe(subjects("bt").rollouts);
      expect(msg?.header.get("Nats-Msg-Id")).toBe(event?.id);
      expect(event?.id).toBe(published[seq - 1]);
    }
    expect(first.rows).toBeGreaterThanOrEqual(6);

    const again = await publishRollouts(jetstream(nc), opts);
    expect(again).toMatchObject({ published: 0, duplicates: 6, rows: 0 });
    const extended = await publishRollouts(jetstream(nc), { ...opts, start: 6, count: 2 });
    expect(extended).toMatchObject({ published: 2, firstSeq: 7, lastSeq: 8 });
  });
  test("the CLI publishes rollouts and the bad-event table, and prints JSON lines", async () => {
    const cli = (...args: string[]) => execa(process.execPath, ["bin/rlloop.js", "simulate", "--nats", server.url, "--policy", "cli", ...args], {
      cwd: REPO, env: { RLLOOP_POLICY_CODE_LENGTH: "6" },
    });
    const run = await cli("--count", "3", "--width", "64", "--height", "48", "--seed", "3");
    const lines = run.stdout.trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.slice(0, 3).map((l) => l.id)).toEqual(["sim-s3-g000000-m0", "sim-s3-g000000-m1", "sim-s3-g000000-m2"]);
    expect(lines[3]).toMatchObject({ summary: "rollouts", policy: "cli", published: 3, duplicates: 0 });

    const bad = await cli("--bad", "--width", "64", "--height", "48");
    const table = bad.stdout.trim().split("\n").map((l) => JSON.parse(l) as { label?: string; expect?: string; summary?: string; published?: number });
    const summary = table.pop();
    expect(table.map((c) => c.label)).toContain("path-escape");
    expect(summary).toMatchObject({ summary: "bad", published: table.length });
  });
});
