// Daemon benchmark on this machine with a real nats-server: intake throughput (events/s, rows/s: validate,
// read the frame from the frame root, decode, check, re-encode PNG, buffer, hold) and round assembly time (move
// frames, advantages, train.jsonl, manifest) for one round of --rows rows, against a baseline measured in the
// same run: a bare durable pull consumer that only acks (the NATS ceiling on this machine).
//   npx tsx bench/intake.ts [--rows 10000] [--steps 4] [--width 640] [--height 480] [--frames 16]
// Frames are the simulator's rendered scenes (src/loop/sim), written once under a frame root and referred to by
// {path}, as rollout workers sharing a filesystem do. The trainer is the test double (not timed).
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { AckPolicy, jetstream, jetstreamManager, type JetStreamClient } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { pino } from "pino";
import { setRootLogger } from "../src/log.js";
import { parseConfig } from "../src/loop/config.js";
import { ensureStreams } from "../src/loop/connection.js";
import { Daemon } from "../src/loop/daemon.js";
import { startOwnServer } from "../src/loop/nats-server.js";
import { ROLLOUT_STREAM, subjects, type RolloutCompletedInput } from "../src/loop/schema.js";
import { renderFrame } from "../src/loop/sim/frame.js";
import { sceneAt, scenario } from "../src/loop/sim/scenario.js";

const { values: args } = parseArgs({
  options: {
    rows: { type: "string", default: "10000" },
    steps: { type: "string", default: "4" },
    width: { type: "string", default: "640" },
    height: { type: "string", default: "480" },
    frames: { type: "string", default: "16" },
  },
});
const ROWS = Number(args.rows);
const STEPS = Number(args.steps);
const ROLLOUTS = Math.ceil(ROWS / STEPS);
const POLICY = "bench";
const REPO = join(import.meta.dirname, "..");

const seconds = (ms: number) => ms / 1000;

async function writeFrames(root: string, count: number): Promise<string[]> {
  mkdirSync(root, { recursive: true });
  const paths: string[] = [];
  for (let i = 0; i < count; i++) {
    const png = await renderFrame(sceneAt(scenario(7, i), i % 3), { width: Number(args.width), height: Number(args.height) });
    const path = join(root, `frame-${i}.png`);
    writeFileSync(path, png);
    paths.push(path);
  }
  return paths;
}

function rollout(i: number, frames: string[]): RolloutCompletedInput {
  return {
    id: `bench-${i}`, policy: POLICY, adapter: { round: 0, name: `${POLICY}-r0` }, group: `g${Math.floor(i / 8)}`,
    reward: (i % 13) / 13,
    steps: Array.from({ length: STEPS }, (_, t) => ({
      image: { path: frames[(i * STEPS + t) % frames.length] as string },
      name: "red cube", code: String((i + t) % 1_000_000).padStart(6, "0"), vllm_logp: -1.5,
    })),
  };
}

async function publishAll(js: JetStreamClient, frames: string[]): Promise<number> {
  const started = performance.now();
  const pending: Promise<unknown>[] = [];
  for (let i = 0; i < ROLLOUTS; i++) {
    const r = rollout(i, frames);
    pending.push(js.publish(subjects(POLICY).rollouts, JSON.stringify(r), { msgID: r.id }));
    if (pending.length >= 256) await Promise.all(pending.splice(0));
  }
  await Promise.all(pending);
  return performance.now() - started;
}

/** Baseline: a bare durable pull consumer that acks every message. */
async function rawConsume(js: JetStreamClient, jsm: Awaited<ReturnType<typeof jetstreamManager>>): Promise<number> {
  await jsm.consumers.add(ROLLOUT_STREAM, { durable_name: "bench-raw", ack_policy: AckPolicy.Explicit, filter_subject: subjects(POLICY).rollouts });
  const consumer = await js.consumers.get(ROLLOUT_STREAM, "bench-raw");
  const started = performance.now();
  const messages = await consumer.consume({ max_messages: 128 });
  let n = 0;
  for await (const m of messages) {
    m.ack();
    if (++n === ROLLOUTS) break;
  }
  return performance.now() - started;
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "rlloop-bench-"));
  const workDir = join(dir, "work");
  const framesRoot = join(dir, "frames");
  const initial = join(dir, "initial");
  execFileSync(process.execPath, [join(REPO, "test", "helpers", "fake-trainer.mjs"), "init", initial]);
  setRootLogger(pino({ level: "warn" }));
  const server = await startOwnServer(parseConfig({ workDir: join(dir, "server") }), pino({ level: "warn" }));
  const nc = await connect({ servers: server.url });
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  try {
    await ensureStreams(jsm, parseConfig({}).stream);
    const frames = await writeFrames(framesRoot, Number(args.frames));
    const publishMs = await publishAll(js, frames);
    const rawMs = await rawConsume(js, jsm);

    const config = parseConfig({
      workDir, policy: { name: POLICY, codeLength: 6, maxSteps: STEPS }, nats: { url: server.url },
      frames: { roots: [framesRoot] }, round: { rows: ROLLOUTS * STEPS, maxWaitS: null },
      consumer: { maxAckPending: ROLLOUTS + 1024 },
      adapter: { initial }, trainer: { command: [process.execPath, join(REPO, "test", "helpers", "fake-trainer.mjs")] },
      observe: { metricsPort: null, statsIntervalS: 60 }, log: { level: "warn" },
    });
    const times = new Map<string, number>();
    const sub = nc.subscribe(subjects(POLICY).rounds, { callback: (_err, msg) => void times.set(msg.json<{ type: string }>().type, performance.now()) });
    const daemon = new Daemon({ config });
    const started = performance.now();
    await daemon.start();
    while (!times.has("round.committed")) await new Promise((r) => setTimeout(r, 20));
    await daemon.stop();
    sub.unsubscribe();

    const intakeMs = (times.get("round.closed") as number) - started;
    const assembleMs = (times.get("round.assembled") as number) - (times.get("round.closed") as number);
    const rows = ROLLOUTS * STEPS;
    console.log(`machine: ${cpus().length} x ${cpus()[0]?.model}; node ${process.version}; frames ${args.width}x${args.height} PNG by path`);
    console.log(`rollouts ${ROLLOUTS} x ${STEPS} steps = ${rows} rows`);
    console.log(`publish (reference)           ${(ROLLOUTS / seconds(publishMs)).toFixed(0).padStart(8)} events/s`);
    console.log(`baseline: bare consume + ack  ${(ROLLOUTS / seconds(rawMs)).toFixed(0).padStart(8)} events/s  ${(rows / seconds(rawMs)).toFixed(0).padStart(8)} rows/s`);
    console.log(`daemon intake                 ${(ROLLOUTS / seconds(intakeMs)).toFixed(0).padStart(8)} events/s  ${(rows / seconds(intakeMs)).toFixed(0).padStart(8)} rows/s  (${seconds(intakeMs).toFixed(1)} s, ratio to baseline ${(rawMs / intakeMs).toFixed(3)})`);
    console.log(`round assembly (${rows} rows)   ${seconds(assembleMs).toFixed(2).padStart(8)} s  (${((assembleMs * 1000) / rows).toFixed(0)} us/row)`);
  } finally {
    await nc.close();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
