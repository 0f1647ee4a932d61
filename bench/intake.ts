// Daemon benchmark on this machine with a real nats-server: intake throughput (events/s, rows/s: validate,
// read the frame from the frame root, decode and check it, write it as it came or re-encoded (src/loop/frames.ts),
// buffer, hold) and round assembly time (move frames, advantages, train.jsonl, manifest) for one round of --rows
// rows, against a baseline measured in the same run: a bare durable pull consumer that only acks (the NATS
// ceiling on this machine). Also where the CPU went during intake: the daemon's process, the nats-server, and the
// whole machine (other tenants' work shows as busy time outside both).
//   npx tsx bench/intake.ts [--rows 10000] [--steps 4] [--width 640] [--height 480] [--frames 16] [--kind sim]
// Frames are the simulator's rendered scenes (src/loop/sim), written once under a frame root and referred to by
// {path}, as rollout workers sharing a filesystem do. --kind picks their encoding: sim = as the simulator renders
// them (8-bit RGBA PNG, written as they came), rgb = flattened to 8-bit RGB PNG (also as they came), palette =
// palette PNG and jpeg = JPEG quality 90 (both decoded and re-encoded). The trainer is the test double (not timed).
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { AckPolicy, jetstream, jetstreamManager, type JetStreamClient } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { pino } from "pino";
import sharp from "sharp";
import { setRootLogger } from "../src/log.js";
import { parseConfig } from "../src/loop/config/index.js";
import { ensureStreams } from "../src/loop/connection.js";
import { Daemon } from "../src/loop/daemon.js";
import { startOwnServer } from "../src/loop/nats-server.js";
import { natsDir } from "../src/loop/paths.js";
import { ROLLOUT_STREAM, subjects, type RolloutCompletedInput } from "../src/contract/index.js";
import { renderFrame } from "../src/tools/sim/frame.js";
import { encodeAs, FRAME_KINDS, frameKind } from "./frame-kinds.js";
import { sceneAt, scenario } from "../src/tools/sim/scenario.js";
import { natsServerBinary } from "../src/setup-env.js";
import { setTimeout as sleep } from "node:timers/promises";

const { values: args } = parseArgs({
  options: {
    rows: { type: "string", default: "10000" },
    steps: { type: "string", default: "4" },
    width: { type: "string", default: "640" },
    height: { type: "string", default: "480" },
    frames: { type: "string", default: "16" },
    kind: { type: "string", default: "sim" },
  },
});
const KIND = frameKind(args.kind);
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
    const path = join(root, `frame-${i}.${FRAME_KINDS[KIND]}`);
    writeFileSync(path, await encodeAs(KIND, png));
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

/** CPU seconds (user + system) of a process so far, from /proc (clock ticks of 1/100 s on Linux). */
function processCpuS(pid: number): number {
  // fields after the parenthesised command name: state is the first, utime the 12th, stime the 13th
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /s, "").split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The whole machine's busy and total CPU seconds so far, all cores (/proc/stat's first line, 1/100 s). */
function machineCpuS(): { busy: number; total: number } {
  const [, ...ticks] = (readFileSync("/proc/stat", "utf8").split("\n")[0] as string).trim().split(/\s+/);
  const n = ticks.map(Number);
  const idle = (n[3] ?? 0) + (n[4] ?? 0); // idle + iowait
  const total = n.slice(0, 8).reduce((a, b) => a + b, 0); // guest time is already inside user
  return { busy: (total - idle) / 100, total: total / 100 };
}

interface CpuMark { self: NodeJS.CpuUsage; server: number; machine: { busy: number; total: number } }

function cpuMark(serverPid: number): CpuMark {
  return { self: process.cpuUsage(), server: processCpuS(serverPid), machine: machineCpuS() };
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "rlloop-bench-"));
  const workDir = join(dir, "work");
  const framesRoot = join(dir, "frames");
  const initial = join(dir, "initial");
  execFileSync(process.execPath, [join(REPO, "test", "helpers", "fake-trainer.mjs"), "init", initial]);
  setRootLogger(pino({ level: "warn" }));
  const serverBin = natsServerBinary();
  // it prints "nats-server: v2.15.1"
  const serverVersion = execFileSync(serverBin, ["--version"], { encoding: "utf8" }).trim().replace(/^nats-server:\s*/, "");
  const server = await startOwnServer(parseConfig({ workDir: join(dir, "server") }), pino({ level: "warn" }));
  const serverPid = (JSON.parse(readFileSync(join(natsDir(join(dir, "server")), "server.json"), "utf8")) as { pid: number }).pid;
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
    const cpuStart = cpuMark(serverPid);
    let cpuClosed: CpuMark | null = null;
    await daemon.start();
    while (!times.has("round.committed")) {
      if (cpuClosed === null && times.has("round.closed")) cpuClosed = cpuMark(serverPid);
      await sleep(20);
    }
    await daemon.stop();
    sub.unsubscribe();

    const intakeMs = (times.get("round.closed") as number) - started;
    const assembleMs = (times.get("round.assembled") as number) - (times.get("round.closed") as number);
    const rows = ROLLOUTS * STEPS;
    // the mark is taken within one 20 ms poll after round.closed; the CPU shares below are of that interval
    const end = cpuClosed ?? cpuMark(serverPid);
    const selfUserS = (end.self.user - cpuStart.self.user) / 1e6;
    const selfS = selfUserS + (end.self.system - cpuStart.self.system) / 1e6;
    const serverS = end.server - cpuStart.server;
    const machineBusyS = end.machine.busy - cpuStart.machine.busy;
    const machineS = end.machine.total - cpuStart.machine.total;
    const perRow = (s: number) => `${((s * 1e6) / rows).toFixed(0).padStart(5)} us/row`;
    console.log(`machine: ${cpus().length} x ${cpus()[0]?.model}; node ${process.version}; sharp ${sharp.versions.sharp} (libvips ${sharp.versions.vips}, concurrency ${sharp.concurrency()}); UV_THREADPOOL_SIZE ${process.env.UV_THREADPOOL_SIZE ?? "4 (default)"}`);
    console.log(`nats-server: ${serverVersion} (${serverBin})`);
    console.log(`frames: ${args.frames} x ${args.width}x${args.height} ${KIND} by path`);
    console.log(`rollouts ${ROLLOUTS} x ${STEPS} steps = ${rows} rows`);
    console.log(`publish (reference)           ${(ROLLOUTS / seconds(publishMs)).toFixed(0).padStart(8)} events/s`);
    console.log(`baseline: bare consume + ack  ${(ROLLOUTS / seconds(rawMs)).toFixed(0).padStart(8)} events/s  ${(rows / seconds(rawMs)).toFixed(0).padStart(8)} rows/s`);
    console.log(`daemon intake                 ${(ROLLOUTS / seconds(intakeMs)).toFixed(0).padStart(8)} events/s  ${(rows / seconds(intakeMs)).toFixed(0).padStart(8)} rows/s  (${seconds(intakeMs).toFixed(1)} s, ratio to baseline ${(rawMs / intakeMs).toFixed(3)})`);
    console.log(`round assembly (${rows} rows)   ${seconds(assembleMs).toFixed(2).padStart(8)} s  (${((assembleMs * 1000) / rows).toFixed(0)} us/row)`);
    console.log(`CPU during intake (${seconds(intakeMs).toFixed(1)} s x ${cpus().length} cores = ${machineS.toFixed(1)} CPU-s):`);
    console.log(`  bench + daemon process      ${selfS.toFixed(1).padStart(6)} CPU-s  ${perRow(selfS)}  (user ${perRow(selfUserS)}, system ${perRow(selfS - selfUserS)}; JS thread and libuv's pool)`);
    console.log(`  nats-server                 ${serverS.toFixed(1).padStart(6)} CPU-s  ${perRow(serverS)}`);
    console.log(`  rest of the machine         ${(machineBusyS - selfS - serverS).toFixed(1).padStart(6)} CPU-s  (other tenants; idle ${(machineS - machineBusyS).toFixed(1)} CPU-s)`);
  } finally {
    await nc.close();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
