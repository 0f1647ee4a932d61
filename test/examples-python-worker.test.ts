// The Python reference rollout worker (examples/rollout_worker.py: nats-py + jsonschema, validating against
// schema/rollout-completed.schema.json) against the daemon with the real trainer (resident ranks, the tiny Qwen3.5
// fixture, CPU): its rollouts, inline and by path, are trained into published rounds; it follows the adapter
// announcements to serve the newest adapter, and a rollback's target after a rollback; its rollout that breaks the
// schema is rejected for exactly what the schema names.
import { join } from "node:path";
import { mkdirSync } from "node:fs";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { subjects, type AdapterPublished } from "../src/contract/index.js";
import { parseConfig } from "../src/loop/config/index.js";
import { Daemon } from "../src/loop/daemon.js";
import { venvPython } from "../src/setup-env.js";
import { POLICY, REPO, accounting, eventsOn, startLoopEnv, waitFor, type LoopEnv } from "./helpers/loop.js";
import { trainFixture } from "./helpers/train-run.js";

type Line = { id: string; seq: number; adapter_round?: number; invalid?: string; path?: string };

describe("examples - the Python rollout worker", () => {
  let env: LoopEnv;
  let daemon: Daemon;

  beforeAll(async () => {
    const fx = await trainFixture();
    env = await startLoopEnv();
    daemon = new Daemon({ config: parseConfig(env.config({
      adapter: { initial: join(fx, "adapter"), reference: join(fx, "ref") },
      trainer: { command: null, resident: true, model: join(fx, "model"), prompt: join(fx, "prompt.jinja"), device: "cpu", dtype: "float32", batch: 2, env: { RLLOOP_LOG_LEVEL: "warn" } },
      log: { level: "warn" },
    })) });
    await daemon.start();
  });

  afterAll(async () => {
    await daemon?.stop();
    await env?.close();
  });

  const worker = async (...args: string[]): Promise<Line[]> => {
    const run = await execa(venvPython(), [join(REPO, "examples", "rollout_worker.py"), "--nats", env.server.url, "--policy", POLICY, "--code-length", "4", ...args], { cwd: REPO });
    return run.stdout.trim().split("\n").map((l) => JSON.parse(l) as Line);
  };
  const published = (round: number) => waitFor(`round ${round} published`, async () => {
    const list = await eventsOn<AdapterPublished>(env.jsm, subjects(POLICY).adapterPublished);
    return list.length >= round ? list : null;
  }, 300_000);

  it("its rollouts train into published rounds, the second served by the adapter the first published", async () => {
    const first = await worker("--count", "4", "--steps", "2", "--send-invalid", "--seed", "1");
    const [announcement] = await published(1);
    const invalid = first.find((l) => l.invalid !== undefined)!;
    expect(invalid.path).toBe("steps.0.vllm_logp");

    const frames = join(env.framesRoot, "py");
    mkdirSync(frames, { recursive: true });
    const second = await worker("--count", "4", "--steps", "2", "--wait-round", "1", "--frames-dir", frames, "--seed", "2");
    expect(second.every((l) => l.adapter_round === 1)).toBe(true);
    await published(2);

    const acc = await accounting(env);
    for (const l of first.filter((l) => l.invalid === undefined)) expect(acc.rounds.get(l.id), l.id).toEqual([1]);
    for (const l of second) expect(acc.rounds.get(l.id), l.id).toEqual([2]);
    expect(announcement?.name).toBe(`${POLICY}-r1`);
    const rejected = await waitFor("the invalid rollout rejected", async () =>
      (await eventsOn<{ id: string; reason: string; message: string }>(env.jsm, subjects(POLICY).rejected)).find((r) => r.id === invalid.id) ?? null);
    expect(rejected.reason).toBe("invalid_schema");
    expect(rejected.message).toContain("'steps.0.vllm_logp' must be <= 0");
  });

  it("after a rollback it serves the rollback's target, read from the announcements when it starts", async () => {
    // an operator's rollback (rlloop rollback --to-round 1 asks the same endpoint)
    const reply = await env.nc.request(subjects(POLICY).rollbackRequest, JSON.stringify({ to_round: 1, reason: "test" }), { timeout: 120_000 });
    expect(JSON.parse(new TextDecoder().decode(reply.data))).toMatchObject({ type: "adapter.rolled_back", round: 1, from: { round: 2 } });
    // no --wait-round: what the worker reads before its first rollout is already the target, not round 2
    const third = await worker("--count", "4", "--steps", "2", "--seed", "3");
    expect(third.map((l) => l.adapter_round)).toEqual([1, 1, 1, 1]);
    await published(3);
    const acc = await accounting(env);
    for (const l of third) expect(acc.rounds.get(l.id), l.id).toEqual([3]);
  });
});
