// The daemon's resident trainer (src/loop/resident-trainer.ts): two PPO rounds through one set of rank processes (2
// Gloo ranks on CPU, the tiny Qwen3.5 "a"), each round a folder with train.jsonl whose frames are relative paths, as
// the daemon writes them. Round 1 starts from a seed round's adapter and optimizer.pt; round 2 continues round 1's
// adapter and optimizer state. Each round's adapter, optimizer state and stats.json must equal, bit for bit (tolerance
// 0), those of the one-shot `rlloop train ppo --gpus 2` on the same rows: the model kept loaded between rounds
// carries nothing from one round into the next. A round with a missing frame fails its attempt and names the row;
// a killed rank is replaced by new ranks.
import { copyFile, mkdir, mkdtemp, readdir, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { execa } from "execa";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TrainJob } from "../src/contract/index.js";
import { parseConfig } from "../src/loop/config/index.js";
import { ResidentRoundTrainer } from "../src/loop/resident-trainer.js";
import { roundJob } from "../src/loop/round-job.js";
import { readSafetensors } from "./helpers/safetensors.js";
import { waitFor } from "./helpers/loop.js";
import { ROOT } from "./helpers/train-fixtures.js";
import { figure, rlloopTrain, trainFixture } from "./helpers/train-run.js";
import { setTimeout as sleep } from "node:timers/promises";
import { createServer, type AddressInfo } from "node:net";
import getPort from "get-port";
import { resolveModel } from "../src/train/job-inputs.js";
import { ResidentTrainer } from "../src/train/resident.js";

const FLAGS = ["--batch", "1", "--accumulation", "2", "--lr", "3e-5", "--gpus", "2", "--device", "cpu", "--dtype", "float32"];
const STATS = ["pg_loss", "kl", "clip_frac", "logp_gap", "logp_gap_abs", "rows"] as const;

describe("train resident - the daemon's RoundTrainer keeps the model loaded between rounds", () => {
  let fx: string;
  let work: string;
  let trainer: ResidentRoundTrainer;

  /** A round folder as the daemon assembles it: frames/ and train.jsonl naming them relative to the folder. */
  const roundFolder = async (round: number, mangle = (row: Record<string, unknown>) => row): Promise<string> => {
    const dir = join(work, `round-${round}`);
    await mkdir(join(dir, "frames"), { recursive: true });
    const rows = (await readFile(join(fx, "ppo.jsonl"), "utf8")).trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    for (const row of rows) {
      const name = basename(row.image as string);
      await copyFile(row.image as string, join(dir, "frames", name));
      row.image = `frames/${name}`;
    }
    await writeFile(join(dir, "train.jsonl"), rows.map((r) => JSON.stringify(mangle(r))).join("\n") + "\n");
    return dir;
  };
  /** The daemon's typed trainer config for the same run as FLAGS. */
  const trainerConfig = () => parseConfig({
    trainer: { model: join(fx, "model"), prompt: join(fx, "prompt.jinja"), batch: 1, accumulation: 2, lr: 3e-5, gpus: 2, device: "cpu", dtype: "float32" },
  }).trainer;
  const job = (dir: string, parent: string, seed: number): TrainJob =>
    roundJob(trainerConfig(), { dir, data: join(dir, "train.jsonl"), adapter: parent, ref: join(fx, "ref"), out: join(dir, "adapter.tmp"), seed });
  const run = (round: number, attempt = 1) => ({ label: `round ${round} attempt ${attempt}`, logFile: join(work, `trainer.${round}.${attempt}.log`) });
  const cli = (parent: string, out: string, seed: number) => rlloopTrain([
    "ppo", "--model", join(fx, "model"), "--prompt", join(fx, "prompt.jinja"), "--data", join(fx, "ppo.jsonl"),
    "--adapter", parent, "--ref", join(fx, "ref"), "--out", out, "--seed", String(seed), ...FLAGS,
  ]);

  beforeAll(async () => {
    fx = await trainFixture();
    work = await mkdtemp(join(tmpdir(), "rlloop-train-resident-"));
    trainer = new ResidentRoundTrainer(trainerConfig(), pino({ level: "warn" }));
    await trainer.start();
  });

  afterAll(async () => {
    await trainer?.close();
  });

  it("runs two rounds, the second continuing the first's optimizer state; each equals the one-shot CLI run", async () => {
    const first = job(await roundFolder(1), join(fx, "seed-round"), 1);
    const stats1 = await trainer.train(first, run(1));
    const second = job(await roundFolder(2), first.out, 2);
    const stats2 = await trainer.train(second, run(2));

    await cli(join(fx, "seed-round"), join(work, "cli-1"), 1);
    await cli(join(work, "cli-1"), join(work, "cli-2"), 2);
    for (const [round, stats, out] of [[1, stats1, first.out], [2, stats2, second.out]] as const) {
      const expected = JSON.parse(await readFile(join(work, `cli-${round}`, "stats.json"), "utf8")) as Record<string, number>;
      for (const field of STATS) expect(stats[field], `round ${round} ${field}`).toBe(expected[field]);
      figure(`resident round ${round}: adapter vs one-shot CLI, max |difference|`, await maxDifference(out, join(work, `cli-${round}`), "adapter_model.safetensors"), 0);
      figure(`resident round ${round}: AdamW moments vs one-shot CLI, max |difference|`, await maxDifference(out, join(work, `cli-${round}`), "optimizer.safetensors"), 0);
    }
    const steps = async (dir: string) => (JSON.parse(await readFile(join(dir, "optimizer.json"), "utf8")) as { step: number }).step;
    const seedSteps = 2; // scripts/reference/train_fixture.py write_seed_round
    expect(await steps(first.out)).toBe(seedSteps + 4); // 2 epochs × 2 updates
    expect(await steps(second.out)).toBe(seedSteps + 8);
  });

  it("a rendezvous port taken between its pick and rank 0's bind: the ranks start again on another, and train", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "0.0.0.0", resolve));
    const takenPort = (taken.address() as AddressInfo).port;
    const picked: number[] = [];
    const pickPort = async (host: string) => {
      const port = picked.length === 0 ? takenPort : await getPort({ host });
      picked.push(port);
      return port;
    };
    const warnings: string[] = [];
    const log = pino({ level: "warn" }, { write: (line: string) => void warnings.push(line) });
    const c = trainerConfig();
    const choice = { model: c.model ?? "", device: c.device, dtype: c.dtype, checkpointing: c.checkpointing, tf32: c.tf32, attention: c.attention, gpus: c.gpus };
    const { model, ranks } = await resolveModel(choice, process.env, "trainer.model");
    try {
      const ranksUp = await ResidentTrainer.start({ model, ranks, log, pickPort });
      try {
        expect(picked).toHaveLength(2);
        expect(picked[1]).not.toBe(takenPort);
        expect(warnings.join("")).toContain("the rendezvous port was taken");
        const dir = await roundFolder(90);
        const result = await ranksUp.run(job(dir, join(fx, "seed-round"), 1));
        expect(result.kind === "ppo" && Number.isFinite(result.stats.pg_loss)).toBe(true);
      } finally {
        await ranksUp.stop();
      }
    } finally {
      taken.close();
    }
  });

  it("fails a round whose frame is missing, naming the row, and trains the next round on the same ranks", async () => {
    const dir = await roundFolder(3, (row) => (row.image === "frames/img2.png" ? { ...row, image: "frames/missing.png" } : row));
    await expect(trainer.train(job(dir, join(fx, "seed-round"), 3), run(3))).rejects.toThrow(
      /resident trainer: round 3 attempt 1: .*train\.jsonl line [38]: image .*frames\/missing\.png: cannot read \(no such file\)/,
    );
    const stats = await trainer.train(job(await roundFolder(4), join(fx, "seed-round"), 1), run(4));
    expect(stats.rows).toBe(8);
  });

  it("a job that is not a TrainJob (a launcher's old camelCase fields) fails, naming them, and the ranks stay up", async () => {
    const { tis_cap: _cap, mismatch_stats: _stats, ...rest } = job(await roundFolder(5), join(fx, "seed-round"), 1);
    const stale = { ...rest, tisCap: null, mismatchStats: false } as unknown as TrainJob;
    const pids = await trainer.rankPids();
    await expect(trainer.train(stale, run(5))).rejects.toThrow(
      /round 5 attempt 1: the job is not a TrainJob .*Unrecognized keys: "tisCap", "mismatchStats"; tis_cap: .*; mismatch_stats: /,
    );
    const stats = await trainer.train(job(await roundFolder(6), join(fx, "seed-round"), 1), run(6));
    expect(stats.rows).toBe(8);
    expect(await trainer.rankPids()).toEqual(pids); // refused before it was sent: no rank restarted, no model reloaded
  });

  it("closing while a round trains lets that round finish, then ends the ranks; later rounds are refused", async () => {
    const closing = new ResidentRoundTrainer(trainerConfig(), pino({ level: "warn" }));
    await closing.start();
    const pids = await closing.rankPids();
    const training = closing.train(job(await roundFolder(6), join(fx, "seed-round"), 1), run(6));
    await sleep(200); // the job is on the ranks
    await closing.close();
    expect((await training).rows).toBe(8);
    expect(await Promise.all(pids.map(running))).toEqual([false, false]);
    await expect(closing.train(job(await roundFolder(7), join(fx, "seed-round"), 1), run(7))).rejects.toThrow("resident trainer: closed");
  });

  it("replaces the ranks after one is killed: at most the next attempt fails (naming the rank), the one after trains", async () => {
    const before = await trainer.rankPids();
    expect(before).toHaveLength(2);
    process.kill(before[1]!, "SIGKILL");
    const dir = await roundFolder(5);
    // Whether the death is noticed before this attempt starts or during it is a race; either outcome is allowed.
    const first = await trainer.train(job(dir, join(fx, "seed-round"), 1), run(5)).catch((err: Error) => err);
    if (first instanceof Error) expect(first.message).toMatch(/resident trainer failed on round 5 attempt 1: rank 1 exited: killed by SIGKILL\b/);
    const stats = await trainer.train(job(dir, join(fx, "seed-round"), 1), run(5, 2));
    expect(stats.rows).toBe(8);
    const after = await trainer.rankPids();
    expect(after).toHaveLength(2);
    expect(after.some((pid) => before.includes(pid))).toBe(false);
  });

  it("a rank that hangs (stopped, as on a wedged GPU) is ended at trainer.timeoutS; the next job trains on new ranks", async () => {
    const config = { ...trainerConfig(), timeoutS: 2 as number | null };
    const hanging = new ResidentRoundTrainer(config, pino({ level: "warn" }));
    await hanging.start();
    const before = await hanging.rankPids();
    try {
      process.kill(before[0]!, "SIGSTOP"); // it never reads the job: no progress, no exit, until it is killed
      const dir = await roundFolder(8);
      await expect(hanging.train(job(dir, join(fx, "seed-round"), 1), run(8))).rejects.toThrow(
        /resident trainer failed on round 8 attempt 1: .*ran past trainer\.timeoutS \(2 s\).*\(ranks ended; the next job starts new ones\)/,
      );
      // a stopped process acts on nothing but SIGKILL: the kill's escalation ends it
      await waitFor("the hung ranks to exit", async () => ((await Promise.all(before.map(running))).some(Boolean) ? null : true));
      config.timeoutS = null; // the next job's own limit: none (a CPU job's time is not this test's subject)
      expect((await hanging.train(job(dir, join(fx, "seed-round"), 1), run(8, 2))).rows).toBe(8);
      expect((await hanging.rankPids()).some((pid) => before.includes(pid))).toBe(false);
    } finally {
      for (const pid of before) if (await running(pid)) process.kill(pid, "SIGKILL");
      await hanging.close();
    }
  });

  it("a stop that a rank does not answer (hung between jobs) kills it after the grace: close() returns, no rank is left", async () => {
    const stopping = new ResidentRoundTrainer(trainerConfig(), pino({ level: "silent" }));
    await stopping.start();
    const pids = await stopping.rankPids();
    try {
      process.kill(pids[0]!, "SIGSTOP"); // it never reads the stop
      await stopping.close(1000); // before: waited for that rank's exit for ever, and so did the daemon's stop
      expect((await Promise.all(pids.map(running))).some(Boolean)).toBe(false);
    } finally {
      for (const pid of pids) if (await running(pid)) process.kill(pid, "SIGKILL");
    }
  });
});

describe("train resident - ranks do not outlive their parent", () => {
  it("SIGKILL of `rlloop train` in the middle of a job ends its ranks at once: nothing trains on, nothing is written", async () => {
    const fx = await trainFixture();
    const out = join(await mkdtemp(join(tmpdir(), "rlloop-orphan-")), "out");
    // 2000 epochs of 8 rows: minutes of work, far longer than this test waits
    const parent = execa(process.execPath, [
      "--import", "tsx", join(ROOT, "test", "helpers", "train-cli.ts"), "train", "ppo", "--model", join(fx, "model"),
      "--prompt", join(fx, "prompt.jinja"), "--data", join(fx, "ppo.jsonl"), "--adapter", join(fx, "seed-round"),
      "--ref", join(fx, "ref"), "--out", out, ...FLAGS, "--epochs", "2000",
    ], { cwd: ROOT, env: { RLLOOP_LOG_LEVEL: "info" }, reject: false });
    let log = "";
    parent.stdout?.on("data", (chunk: Buffer) => (log += chunk.toString()));
    await waitFor("the ranks' job to start", () => /"msg":"ppo start"/.test(log) || null, 120_000);
    const ranks = await childPids(parent.pid!);
    expect(ranks).toHaveLength(2);
    // (the exit only: the ranks share the parent's stdout, so its stream closes when they are gone too)
    const exited = new Promise((resolve) => parent.once("exit", resolve));
    parent.kill("SIGKILL");
    await exited;
    try {
      await waitFor("the ranks to exit", async () => ((await Promise.all(ranks.map(running))).some(Boolean) ? null : true));
    } finally {
      for (const pid of ranks) if (await running(pid)) process.kill(pid, "SIGKILL");
    }
    await expect(readFile(join(out, "stats.json"))).rejects.toThrow(/ENOENT/);
  });
});

/** Process ids whose parent is `pid` (from /proc). */
async function childPids(pid: number): Promise<number[]> {
  const found: number[] = [];
  for (const name of await readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await readFile(join("/proc", name, "stat"), "utf8").catch(() => "");
    // fields after the parenthesised command name: state, ppid, ...
    const [, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(ppid) === pid) found.push(Number(name));
  }
  return found;
}

/** Whether `pid` still runs (a zombie, exited but not yet reaped, does not). */
async function running(pid: number): Promise<boolean> {
  const stat = await readFile(join("/proc", String(pid), "stat"), "utf8").catch(() => null);
  return stat !== null && stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
}

/** Largest absolute difference between the same-named tensors of two folders' `file` (the same keys required). */
async function maxDifference(actualDir: string, expectedDir: string, file: string): Promise<number> {
  const [actual, expected] = await Promise.all([readSafetensors(join(actualDir, file)), readSafetensors(join(expectedDir, file))]);
  expect([...actual.keys()].sort()).toEqual([...expected.keys()].sort());
  let worst = 0;
  for (const [key, want] of expected) {
    const got = actual.get(key)!.data;
    for (let i = 0; i < want.data.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want.data[i]!));
  }
  expect(worst, file).toBe(0);
  return worst;
}
