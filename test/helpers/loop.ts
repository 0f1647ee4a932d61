// Fixtures for the daemon suites: a real nats-server, a work dir with a frame root and an initial adapter (written
// by the test-double trainer), config files pointing at both, rollouts with real PNG frames, and readers of the
// events the daemon records. Shared by test/loop-*.test.ts.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { execFileSync } from "node:child_process";
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import { connect, type NodeConnectionOptions } from "@nats-io/transport-node";
import sharp from "sharp";
import { parseConfig, type ConfigInput } from "../../src/loop/config/index.js";
import { ensureStreams } from "../../src/loop/connection.js";
import { consumerName, decodeWithNonFinite, EVENT_STREAM, ROLLOUT_STREAM, subjects, type RolloutCompletedInput } from "../../src/contract/index.js";
import { startNatsServer, type NatsServer } from "./nats.js";
import { setTimeout as sleep } from "node:timers/promises";

export const REPO = resolve(import.meta.dirname, "..", "..");
export const FAKE_TRAINER = join(REPO, "test", "helpers", "fake-trainer.mjs");
export const POLICY = "bt";

/** argv of `rlloop <args>` run from the TypeScript sources (bin/rlloop.js would prefer a possibly stale dist/). */
export function cliArgs(...args: string[]): string[] {
  return ["--import", "tsx", join(REPO, "src", "cli", "main.ts"), ...args];
}
export const CODE_LENGTH = 4;

export interface LoopEnv {
  server: NatsServer;
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  dir: string;
  workDir: string;
  framesRoot: string;
  initialAdapter: string;
  /** a full test config (overrides merged shallowly per section) */
  config(overrides?: ConfigInput): ConfigInput;
  /** write config JSON to a file and return its path */
  writeConfig(overrides?: ConfigInput): string;
  close(): Promise<void>;
}

/** Where the env's NATS is: by default a server of its own; else one the test runs (a cluster, a server with auth
 *  or TLS), with the options the env's own connection needs there and the streams' replicas. */
export interface LoopEnvOptions {
  nats?: { url: string; stop(): Promise<void> };
  connect?: Partial<NodeConnectionOptions>;
  replicas?: number;
}

export async function startLoopEnv(opts: LoopEnvOptions = {}): Promise<LoopEnv> {
  const server = opts.nats ? externalServer(opts.nats) : await startNatsServer();
  const dir = mkdtempSync(join(tmpdir(), "rlloop-loop-"));
  const workDir = join(dir, "work");
  const framesRoot = join(dir, "frames");
  const initialAdapter = join(dir, "sft-adapter");
  mkdirSync(framesRoot, { recursive: true });
  execFileSync(process.execPath, [FAKE_TRAINER, "init", initialAdapter]);
  const nc = await connect({ servers: server.url.split(","), maxReconnectAttempts: -1, reconnectTimeWait: 200, ...opts.connect });
  const jsm = await jetstreamManager(nc);
  // the streams exist before any daemon runs, as in a deployment where workers publish first
  await ensureStreams(jsm, parseConfig({ stream: { replicas: opts.replicas ?? 1 } }).stream);
  const config = (overrides: ConfigInput = {}): ConfigInput => {
    const base: ConfigInput = {
      workDir,
      policy: { name: POLICY, codeLength: CODE_LENGTH, maxSteps: 8 },
      nats: { url: server.url },
      consumer: { ackWaitS: 2, fetchBatch: 32 },
      frames: { roots: [framesRoot], maxBytes: 1 << 20, maxPixels: 1 << 20 },
      round: { rows: 8, maxWaitS: null, minRows: 1 },
      offPolicy: { maxStaleness: 1 },
      adapter: { initial: initialAdapter },
      trainer: { command: [process.execPath, FAKE_TRAINER], retryMinS: 0.2, retryMaxS: 1 },
      observe: { statsIntervalS: 1, metricsPort: 0 },
      log: { level: "warn" },
    };
    const merged: Record<string, unknown> = { ...base };
    for (const [key, value] of Object.entries(overrides)) {
      const prev = merged[key];
      merged[key] = typeof value === "object" && value !== null && !Array.isArray(value) && typeof prev === "object" && prev !== null ? { ...prev, ...value } : value;
    }
    return merged as ConfigInput;
  };
  let configs = 0;
  return {
    server, nc, js: jetstream(nc), jsm, dir, workDir, framesRoot, initialAdapter, config,
    writeConfig(overrides = {}) {
      const file = join(dir, `config-${configs++}.json`);
      writeFileSync(file, JSON.stringify(config(overrides), null, 2));
      return file;
    },
    async close() {
      await nc.close();
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A server the test runs itself, in the shape of the env's own (restarting it is the test's business). */
function externalServer(nats: NonNullable<LoopEnvOptions["nats"]>): NatsServer {
  const refuse = () => Promise.reject(new Error("the env's NATS is the test's own: restart it there"));
  const noMonitor = () => {
    throw new Error("the env's NATS is the test's own: ask it for its monitoring endpoint");
  };
  return { url: nats.url, port: 0, storeDir: "", monitorUrl: noMonitor, shutdown: refuse, restart: refuse, stop: () => nats.stop() };
}

/** `data` as a byte stream, what an object store's put reads. */
export function bytesStream(data: Uint8Array): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({ start: (c) => { c.enqueue(data); c.close(); } });
}

let framePng: Promise<Buffer> | null = null;
/** A small real PNG frame (64x48), the same for every step (frames are not what these suites test). */
export function testFrame(): Promise<Buffer> {
  framePng ??= sharp({ create: { width: 64, height: 48, channels: 3, background: { r: 40, g: 120, b: 200 } } }).png().toBuffer();
  return framePng;
}

export interface RolloutSpec {
  steps?: number;
  group?: string;
  adapterRound?: number;
  reward?: number;
}

/** Rollout `i` of a test run: deterministic rewards and codes, inline PNG frames. */
export async function makeRollout(tag: string, i: number, spec: RolloutSpec = {}): Promise<RolloutCompletedInput> {
  const png = (await testFrame()).toString("base64");
  const steps = spec.steps ?? 1 + (i % 3);
  return {
    id: `${tag}-${i}`,
    policy: POLICY,
    adapter: { round: spec.adapterRound ?? 0, name: `${POLICY}-r${spec.adapterRound ?? 0}` },
    ...(spec.group === undefined ? {} : { group: spec.group }),
    reward: spec.reward ?? ((i * 37) % 11) / 10,
    steps: Array.from({ length: steps }, (_, t) => ({
      image: { png_base64: png },
      name: `target-${i % 5}`,
      code: String((i * 7 + t) % 10 ** CODE_LENGTH).padStart(CODE_LENGTH, "0"),
      vllm_logp: -0.5 - ((i + t) % 4) * 0.25,
      ...(t % 2 === 0 ? { memory: ["01", "10"] as [string, string] } : {}),
    })),
  };
}

/** Publish with Nats-Msg-Id = id (as rollout workers do); returns the stream sequences. */
export async function publishRollouts(js: JetStreamClient, rollouts: RolloutCompletedInput[]): Promise<number[]> {
  const seqs: number[] = [];
  for (const r of rollouts) seqs.push((await js.publish(subjects(POLICY).rollouts, JSON.stringify(r), { msgID: r.id })).seq);
  return seqs;
}

/** NATS subject matching: `*` one token, `>` the rest. */
export function subjectMatches(pattern: string, subject: string): boolean {
  const p = pattern.split(".");
  const s = subject.split(".");
  for (let i = 0; i < p.length; i++) {
    if (p[i] === ">") return s.length > i;
    if (p[i] !== "*" && p[i] !== s[i]) return false;
  }
  return p.length === s.length;
}

/** Every message of RLLOOP_EVENTS on `subject` (wildcards allowed), parsed (the codec: NaN stays NaN), in stream order. */
export async function eventsOn<T = Record<string, unknown>>(jsm: JetStreamManager, subject: string): Promise<T[]> {
  const info = await jsm.streams.info(EVENT_STREAM).catch(() => null);
  if (!info) return [];
  const out: T[] = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
    const msg = await jsm.streams.getMessage(EVENT_STREAM, { seq }).catch(() => null);
    if (msg && subjectMatches(subject, msg.subject)) out.push(decodeWithNonFinite(msg.string()) as T);
  }
  return out;
}

export async function rolloutStreamSeqs(jsm: JetStreamManager): Promise<number> {
  return (await jsm.streams.info(ROLLOUT_STREAM)).state.last_seq;
}

/** Poll until `check` returns a value (not a timed assertion: the bound only stops a hung test). */
export async function waitFor<T>(what: string, check: () => Promise<T | null | undefined | false> | T | null | undefined | false, boundMs = 45_000): Promise<T> {
  const until = Date.now() + boundMs;
  for (;;) {
    const value = await check();
    if (value !== null && value !== undefined && value !== false) return value;
    if (Date.now() > until) throw new Error(`gave up waiting for ${what}`);
    await sleep(100);
  }
}

/** The daemon as a child process (`rlloop daemon --config FILE` from the sources), its JSON log lines collected. */
export interface DaemonProcess {
  child: ChildProcess;
  lines: Array<Record<string, unknown>>;
  /** what it wrote to stderr so far (the CLI's one-line error) */
  stderr(): string;
  waitForLog(what: string, match: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  exited: Promise<number | null>;
}

export function spawnDaemon(configFile: string, env: Record<string, string> = {}, args: string[] = []): DaemonProcess {
  const child = spawn(process.execPath, cliArgs("daemon", "--config", configFile, ...args), {
    cwd: REPO, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: Array<Record<string, unknown>> = [];
  let rest = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    rest += chunk.toString();
    const parts = rest.split("\n");
    rest = parts.pop() ?? "";
    for (const part of parts) {
      try {
        lines.push(JSON.parse(part) as Record<string, unknown>);
      } catch {
        lines.push({ raw: part });
      }
    }
  });
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  return {
    child, lines, exited,
    stderr: () => stderr,
    waitForLog: (what, match) => waitFor(what, () => {
      if (child.exitCode !== null) throw new Error(`daemon exited (${child.exitCode}) while waiting for ${what}:\n${stderr}\n${lines.slice(-10).map((l) => JSON.stringify(l)).join("\n")}`);
      return lines.find(match) ?? null;
    }, 90_000).catch((err: Error) => {
      // a wait that gives up says what the daemon was doing meanwhile: a rare failure is then diagnosable from CI's log
      throw new Error(`${err.message}; the daemon's last log lines:\n${lines.slice(-30).map((l) => JSON.stringify(l)).join("\n")}\n${stderr.slice(-2000)}`, { cause: err });
    }),
  };
}

/** Where each rollout id ended: committed rounds that used it (published or gate-rejected) and rejection events. */
export interface Accounting {
  rounds: Map<string, number[]>;
  rejections: Map<string, string[]>;
  /** committed rounds whose every rollout was poison */
  emptyRounds: number[];
}

/** `workDir`: the work dir whose manifests count (a standby's, which holds the history it took over). */
export async function accounting(env: LoopEnv, workDir = env.workDir): Promise<Accounting> {
  const { readManifest } = await import("../../src/loop/manifest.js");
  const { roundDir } = await import("../../src/loop/paths.js");
  const { roundNumbers } = await import("../../src/loop/recovery.js");
  const rounds = new Map<string, number[]>();
  const emptyRounds: number[] = [];
  for (const round of await roundNumbers(workDir, POLICY)) {
    const manifest = await readManifest(roundDir(workDir, POLICY, round));
    if (!manifest || manifest.status !== "committed") continue;
    if (manifest.outcome === "empty") emptyRounds.push(round);
    for (const e of manifest.events) rounds.set(e.id, [...(rounds.get(e.id) ?? []), round]);
  }
  const rejections = new Map<string, string[]>();
  for (const r of await eventsOn<{ id: string | null; reason: string; seq: number }>(env.jsm, subjects(POLICY).rejected)) {
    const key = r.id ?? `seq:${r.seq}`;
    rejections.set(key, [...(rejections.get(key) ?? []), r.reason]);
  }
  return { rounds, rejections, emptyRounds };
}

/** The invariant of DESIGN.md's reliability rules: each id in exactly one committed round or one rejection. */
export function misaccounted(acc: Accounting, ids: readonly string[]): string[] {
  const bad: string[] = [];
  for (const id of ids) {
    const used = acc.rounds.get(id)?.length ?? 0;
    const rejected = acc.rejections.get(id)?.length ?? 0;
    if (used + rejected !== 1) bad.push(`${id}: ${used} round(s) ${JSON.stringify(acc.rounds.get(id) ?? [])}, ${rejected} rejection(s)`);
  }
  return bad;
}

/** Waits until nothing is pending on the daemon's consumer and each of `ids` is in one committed round or one
 *  rejection; resolves with the accounting (null consumer info while a deleted consumer is being re-created). */
export async function settled(env: LoopEnv, ids: readonly string[], boundMs = 90_000): Promise<Accounting> {
  return waitFor("every rollout accounted for", async () => {
    const info = await env.jsm.consumers.info(ROLLOUT_STREAM, consumerName(POLICY)).catch(() => null);
    if (!info || info.num_ack_pending > 0 || info.num_pending > 0) return null;
    const acc = await accounting(env);
    return misaccounted(acc, ids).length === 0 ? acc : null;
  }, boundMs);
}
