// The fault-injection campaign of docs/daemon.md "Faults": many cycles of kill and restart with good and bad rollouts
// mixed, against a real nats-server, then a count of where every rollout ended. Each cycle publishes a batch (good
// rollouts; bad ones the schema refuses, ones nested too deep, ones with a reward out of range, ones with a vllm_logp
// far from their adapter's (logp_mismatch), and poison rollouts the trainer crashes or diverges on), starts the daemon, and does one of: SIGKILL the daemon after a random delay, SIGKILL the
// trainer processes in the middle of a job (a rank killed from outside), break the trainer for a while (every job
// fails, the probe too) and repair it, or let the cycle run; with --full-disk the work dir is a real 64 MiB tmpfs
// (mounted by the bench: root) and a cycle may also fill it to ENOSPC for a while and free it, while the daemon runs
// or before it starts (its start waits for the disk). At the end a last
// daemon drains everything.
// The invariant checked: every good rollout in exactly one committed round, every bad one in exactly one rejection
// with its expected reason, no adapter announced twice, no daemon that ended on its own (every end is the bench's
// signal: a fault of the trainer, its host or a rollout never stops the daemon).
//   npx tsx bench/fault-injection.ts [--cycles 40] [--seed 7] [--trainer fake|real] [--full-disk]
// --trainer real runs the resident trainer (rank processes, the tests' tiny Qwen3.5 on CPU): slower, its kills hit
// real rank processes; fake is the test double as a custom trainer.command (a killed "rank" is its process).
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { consumerName, ROLLOUT_STREAM, subjects, type AdapterPublished } from "../src/contract/index.js";
import {
  accounting, eventsOn, makeRollout, publishRollouts, spawnDaemon, startLoopEnv, waitFor, type DaemonProcess, type LoopEnv,
} from "../test/helpers/loop.js";
import { smallDisk } from "../test/helpers/small-disk.js";
import { trainFixture } from "../test/helpers/train-run.js";
import { readManifest } from "../src/loop/manifest.js";
import { roundDir } from "../src/loop/paths.js";
import { mersenne } from "pure-rand/generator/mersenne";
import { uniformFloat64 } from "pure-rand/distribution/uniformFloat64";
import { setTimeout as sleep } from "node:timers/promises";

const { values: args } = parseArgs({
  options: {
    cycles: { type: "string", default: "40" }, seed: { type: "string", default: "7" }, trainer: { type: "string", default: "fake" },
    "full-disk": { type: "boolean", default: false },
  },
});
const FULL_DISK = args["full-disk"];
const CYCLES = Number(args.cycles);
const REAL = args.trainer === "real";
const POISON = "target-poison";
const DIVERGES = "target-diverges";

/** Seeded uniform draws in [0, 1) (Mersenne Twister, pure-rand): the same seed draws the same sequence. */
function prng(seed: number): () => number {
  const generator = mersenne(seed);
  return () => uniformFloat64(generator);
}
const random = prng(Number(args.seed));
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;

type Expect = { id: string; seq: number; want: "trained" | string };

async function batch(env: LoopEnv, cycle: number, expected: Expect[]): Promise<void> {
  const size = 6 + Math.floor(random() * 6);
  for (let i = 0; i < size; i++) {
    // the real trainer has no rollout it crashes on: poison rollouts are the test double's
    const kind = pick(REAL ? ["good", "good", "good", "good", "schema", "deep", "reward", "gap"] as const : ["good", "good", "good", "good", "schema", "deep", "reward", "poison", "diverge", "gap"] as const);
    const r = await makeRollout(`c${cycle}-${kind}`, i, { steps: 1 + Math.floor(random() * 2), adapterRound: 0 });
    let payload: string;
    let want: string = "trained";
    if (kind === "schema") {
      (r.steps[0] as { vllm_logp: number }).vllm_logp = 1;
      want = "invalid_schema";
    } else if (kind === "reward") {
      r.reward = 1e200;
      want = "reward_out_of_range";
    } else if (kind === "gap") {
      for (const step of r.steps) step.vllm_logp = -999; // valid (limits.minLogp -1000), far from any adapter's
      want = "logp_mismatch";
    } else if (kind === "poison") {
      r.steps[0]!.name = POISON;
      want = "poison";
    } else if (kind === "diverge") {
      r.steps[0]!.name = DIVERGES;
      want = "poison";
    }
    payload = JSON.stringify(r);
    if (kind === "deep") {
      payload = payload.replace('"reward":', `"x":${"[".repeat(3000)}${"]".repeat(3000)},"reward":`);
      want = "too_deep";
    }
    const seq = (await env.js.publish(subjects("bt").rollouts, payload, { msgID: r.id })).seq;
    expected.push({ id: r.id, seq, want });
  }
}

/** Pids of the processes under `pid` whose command line matches `pattern` (the trainer's processes). */
function descendants(pid: number, pattern: RegExp): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
    } catch {
      // gone
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      try {
        if (pattern.test(readFileSync(`/proc/${c}/cmdline`, "utf8"))) out.push(c);
      } catch {
        // gone
      }
      walk(c);
    }
  };
  walk(pid);
  return out;
}


async function main() {
  const env = await startLoopEnv();
  const disk = FULL_DISK ? smallDisk(env.workDir, 64) : null;
  const broken = join(env.dir, "trainer-broken");
  const trainerEnv = { FAKE_TRAINER_POISON: POISON, FAKE_TRAINER_NAN_NAME: DIVERGES, FAKE_TRAINER_FAIL_WHILE: broken, FAKE_TRAINER_SLEEP_MS: "300", RLLOOP_LOG_LEVEL: "warn" };
  let trainer: Record<string, unknown> = { env: trainerEnv, retryMinS: 0.3, retryMaxS: 2 };
  let initial = env.initialAdapter;
  if (REAL) {
    const fx = await trainFixture();
    initial = join(fx, "adapter");
    trainer = { command: null, resident: true, model: join(fx, "model"), prompt: join(fx, "prompt.jinja"), device: "cpu", dtype: "float32", batch: 2, env: { RLLOOP_LOG_LEVEL: "warn" }, retryMinS: 0.3, retryMaxS: 2 };
  }
  // the test double's gaps are -0.001·vllm_logp (~0.001, 0.999 for a "gap" rollout): a round's mean |gap| passes 0.05
  // without a "gap" rollout, not with one. The tiny real model's good rows are tens of nats from the rollouts'
  // made-up log-probs, a "gap" one's ~1000
  const gate = REAL ? { maxLogpGapAbs: 100, maxRolloutLogpGapAbs: 300 } : { maxLogpGapAbs: 0.05, maxRolloutLogpGapAbs: 0.5 };
  const file = env.writeConfig({
    adapter: { initial }, trainer, gate, round: { rows: 8, maxWaitS: 1, minRows: 1 }, offPolicy: { maxStaleness: 1000 }, log: { level: "info" },
  });
  const expected: Expect[] = [];
  const tally = { daemonKills: 0, trainerKills: 0, trainerBroken: 0, diskFull: 0, diskFullAtStart: 0, quiet: 0, selfExits: 0 };
  /** Signals the daemon; one that already ended did so on its own (counted, its last lines shown). */
  const signal = (daemon: DaemonProcess, sig: NodeJS.Signals) => {
    if (daemon.child.exitCode === null && daemon.child.signalCode === null) return void daemon.child.kill(sig);
    tally.selfExits++;
    process.stderr.write(`the daemon ended on its own (${daemon.child.exitCode}):\n${daemon.lines.slice(-5).map((l) => JSON.stringify(l)).join("\n")}\n`);
  };
  const started = Date.now();
  for (let cycle = 0; cycle < CYCLES; cycle++) {
    await batch(env, cycle, expected);
    const actions = REAL ? ["daemon", "trainer", "quiet"] as const : ["daemon", "daemon", "trainer", "broken", "quiet"] as const;
    const action = pick(disk ? [...actions, "full", "full at start"] as const : actions);
    if (action === "full at start" && disk) disk.fill(); // the daemon (re)starts on a full disk: its start waits
    const daemon: DaemonProcess = spawnDaemon(file);
    if (action === "full at start" && disk) {
      await sleep(1500 + random() * 2000);
      disk.free();
      tally.diskFullAtStart++;
    }
    await daemon.waitForLog("daemon started", (l) => l.msg === "daemon started");
    if (action === "daemon") {
      await sleep(200 + random() * 2500);
      signal(daemon, "SIGKILL");
      tally.daemonKills++;
    } else if (action === "trainer") {
      const pattern = REAL ? /rank-process/ : /fake-trainer/;
      const pids = await waitFor("a trainer process", () => {
        const found = descendants(daemon.child.pid!, pattern);
        return found.length > 0 ? found : null;
      }, 20_000).catch(() => [] as number[]);
      for (const pid of pids) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // it finished first
        }
      }
      if (pids.length > 0) tally.trainerKills++;
      await sleep(1500);
      signal(daemon, "SIGTERM");
    } else if (action === "broken") {
      writeFileSync(broken, "");
      await sleep(1500 + random() * 2000);
      rmSync(broken, { force: true });
      tally.trainerBroken++;
      await sleep(1000);
      signal(daemon, "SIGTERM");
    } else if (action === "full" && disk) {
      await sleep(random() * 1500); // at intake, assembling, training or committing
      disk.fill();
      await sleep(1500 + random() * 2000);
      disk.free();
      tally.diskFull++;
      await sleep(1000);
      signal(daemon, "SIGTERM");
    } else if (action === "full at start") {
      await sleep(2000);
      signal(daemon, "SIGTERM");
    } else {
      await sleep(2000);
      signal(daemon, "SIGTERM");
      tally.quiet++;
    }
    await daemon.exited;
    process.stderr.write(`cycle ${cycle + 1}/${CYCLES}: ${action}\n`);
  }
  // a last daemon drains everything
  rmSync(broken, { force: true });
  const last = spawnDaemon(file);
  await waitFor("everything settled", async () => {
    const info = await env.jsm.consumers.info(ROLLOUT_STREAM, consumerName("bt")).catch(() => null);
    return info && info.num_pending === 0 && info.num_ack_pending === 0 ? true : null;
  }, 600_000);
  await sleep(2000);
  last.child.kill("SIGTERM");
  await last.exited;

  const acc = await accounting(env);
  const rejectionsBySeq = new Map<number, string[]>();
  for (const r of await eventsOn<{ seq: number; reason: string }>(env.jsm, subjects("bt").rejected)) {
    rejectionsBySeq.set(r.seq, [...(rejectionsBySeq.get(r.seq) ?? []), r.reason]);
  }
  const wrong: string[] = [];
  const counts = { good: 0, goodTrainedOnce: 0, bad: 0, badRejectedOnceAsExpected: 0, gapTrainedInDisagreeingRound: 0, divergeInDivergingRound: 0 };
  // a wrong-log-prob or diverging rollout is singled out only while fewer than half of its round's are such: one in a
  // round where half or more were is the round's gate's to reject (consumed, not singled out; the round rejected by
  // the gate), not a loss
  const idsOf = (kind: string) => new Set(expected.filter((e) => e.id.includes(`-${kind}-`)).map((e) => e.id));
  const gapIds = idsOf("gap");
  const divergeIds = idsOf("diverge");
  const outcomes = new Map<number, string | undefined>();
  for (const round of new Set([...acc.rounds.values()].flat())) outcomes.set(round, (await readManifest(roundDir(env.workDir, "bt", round)))?.outcome);
  const halfOrMore = (round: number, kind: Set<string>) => {
    const members = [...acc.rounds].filter(([, rounds]) => rounds.includes(round)).map(([id]) => id);
    return members.filter((id) => kind.has(id)).length * 2 >= members.length && outcomes.get(round) === "rejected";
  };
  for (const e of expected) {
    const rounds = acc.rounds.get(e.id) ?? [];
    const rejections = rejectionsBySeq.get(e.seq) ?? [];
    const consumedWhole = rounds.length === 1 && rejections.length === 0;
    if (gapIds.has(e.id) && consumedWhole && halfOrMore(rounds[0]!, gapIds)) {
      counts.gapTrainedInDisagreeingRound++;
      continue;
    }
    if (divergeIds.has(e.id) && consumedWhole && halfOrMore(rounds[0]!, divergeIds)) {
      counts.divergeInDivergingRound++;
      continue;
    }
    if (e.want === "trained") {
      counts.good++;
      if (rounds.length === 1 && rejections.length === 0) counts.goodTrainedOnce++;
      else wrong.push(`${e.id}: rounds ${JSON.stringify(rounds)}, rejections ${JSON.stringify(rejections)}`);
    } else {
      counts.bad++;
      if (rounds.length === 0 && rejections.length === 1 && rejections[0] === e.want) counts.badRejectedOnceAsExpected++;
      else wrong.push(`${e.id} (want ${e.want}): rounds ${JSON.stringify(rounds)}, rejections ${JSON.stringify(rejections)}`);
    }
  }
  const adapters = await eventsOn<AdapterPublished>(env.jsm, subjects("bt").adapterPublished);
  const announcedTwice = adapters.length - new Set(adapters.map((a) => a.round)).size;
  const badByReason: Record<string, number> = {};
  for (const e of expected) if (e.want !== "trained") badByReason[e.want] = (badByReason[e.want] ?? 0) + 1;
  const report = {
    trainer: REAL ? "real (resident ranks, tiny model, CPU)" : "fake (test double)", cycles: CYCLES, seed: Number(args.seed), ...tally,
    ...counts, badByReason, rounds: new Set([...acc.rounds.values()].flat()).size, emptyRounds: acc.emptyRounds.length, adapters: adapters.length, announcedTwice,
    wrong: wrong.length, minutes: Number(((Date.now() - started) / 60_000).toFixed(1)),
  };
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  for (const w of wrong.slice(0, 20)) process.stdout.write(`  ${w}\n`);
  disk?.close();
  await env.close();
  if (wrong.length > 0 || announcedTwice > 0 || tally.selfExits > 0) process.exitCode = 1;
}

await main();
