// A custom trainer.command that is a wrapper with workers of its own (a shell script, torchrun): a worker holding the
// command's output, and the command hung (past trainer.timeoutS) or exited. The job must end either way — with the
// output on a pipe, execa's result waited for the pipe's end, so a kill of the command alone left a timed-out job,
// its round and the stream behind it waiting for ever — and no worker may outlive its job (it would keep the GPU):
// not one in the command's group, nor one in a session of its own, nor one a killed daemon's run left. Real processes.
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { execa } from "execa";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TrainJob } from "../src/contract/index.js";
import { CliRoundTrainer } from "../src/loop/cli-trainer.js";
import { parseConfig } from "../src/loop/config/index.js";
import { TrainerError } from "../src/loop/errors.js";
import { markedProcesses } from "../src/loop/marked-processes.js";
import { REPO, waitFor } from "./helpers/loop.js";

/** A wrapper that starts a worker sharing its output (its pid written down; in a session of its own with MODE
 *  escape, as torchrun starts its workers), then hangs or writes a round's outputs and exits. */
const WRAPPER = `#!/usr/bin/env bash
set -e
out=""; while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
if [ "$MODE" = escape ]; then
  # the worker writes its pid once in its own session, and the wrapper waits for it: a wrapper that exited first
  # would have its group ended while the worker was still in it
  setsid bash -c 'echo $$ > "$WORKER_PID_FILE"; exec sleep 600' &
  until [ -s "$WORKER_PID_FILE" ]; do sleep 0.05; done
else
  sleep 600 &
  echo $! > "$WORKER_PID_FILE"
fi
echo "worker started"
if [ "$MODE" = hang ]; then sleep 600; fi
mkdir -p "$out"
echo '{}' > "$out/adapter_config.json"
# a whole safetensors file: an 8-byte header length (54), the header, one float32 zero
header='{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
{ printf '\\x36\\x00\\x00\\x00\\x00\\x00\\x00\\x00'; printf '%s' "$header"; printf '\\x00\\x00\\x00\\x00'; } > "$out/adapter_model.safetensors"
echo '{"pg_loss":0,"kl":0,"clip_frac":0,"logp_gap":0,"logp_gap_abs":0,"rows":1,"train_s":0}' > "$out/stats.json"
`;

/** Running, not a zombie (an orphan ended but not yet reaped where PID 1 does not reap: it holds no GPU). */
const alive = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
};

describe("loop - a trainer command with workers of its own", () => {
  let dir: string;
  let script: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "rlloop-cli-trainer-"));
    script = join(dir, "wrapper.sh");
    await writeFile(script, WRAPPER);
    await chmod(script, 0o755);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const job = (name: string): TrainJob => ({
    kind: "ppo", data: join(dir, "train.jsonl"), adapter: "a", ref: "r", out: join(dir, name), epochs: 1, lr: 1e-5, batch: 1,
    accumulation: 1, seed: 0, image_base: dir, prompt: null, tis_cap: null, mismatch_stats: false,
  } as TrainJob);
  const trainer = (mode: string, timeoutS: number | null) => {
    const pidFile = join(dir, `worker-${mode}.pid`);
    const config = parseConfig({ trainer: { command: [script], timeoutS, env: { MODE: mode, WORKER_PID_FILE: pidFile } } });
    return { trainer: new CliRoundTrainer(config.trainer), workerPid: () => Number(readFileSync(pidFile, "utf8")) };
  };

  it("a command past trainer.timeoutS ends with its workers, though a worker held its output", async () => {
    const { trainer: t, workerPid } = trainer("hang", 3); // room for bash to start its worker on a loaded machine
    const err = await t.train(job("out-hang"), { label: "round 1 attempt 1", logFile: join(dir, "hang.log") }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TrainerError);
    expect((err as Error).message).toMatch(/timed out on round 1 attempt 1 after trainer.timeoutS 3 s/);
    expect(readFileSync(join(dir, "hang.log"), "utf8")).toContain("worker started");
    await waitFor("the worker ended", async () => !alive(workerPid()));
  });

  it("a command that exits while a worker still holds its output gives its result, and the worker is ended", async () => {
    const { trainer: t, workerPid } = trainer("exit", null);
    const stats = await t.train(job("out-exit"), { label: "round 2 attempt 1", logFile: join(dir, "exit.log") });
    expect(stats.rows).toBe(1);
    expect(existsSync(join(dir, "out-exit", "stats.json"))).toBe(true);
    await waitFor("the worker ended", async () => !alive(workerPid()));
  });

  it("a process running a job that is ended by a signal it does not handle ends the job's group with it", async () => {
    // `rlloop replay --train` installs no signal handler: SIGTERM's default action exits without an 'exit' event
    const pidFile = join(dir, "worker-signal.pid");
    const runner = join(dir, "runner.mts");
    await writeFile(runner, `
      import { CliRoundTrainer } from ${JSON.stringify(join(REPO, "src", "loop", "cli-trainer.ts"))};
      import { parseConfig } from ${JSON.stringify(join(REPO, "src", "loop", "config", "index.ts"))};
      const config = parseConfig({ trainer: { command: [${JSON.stringify(script)}], timeoutS: null, env: { MODE: "hang", WORKER_PID_FILE: ${JSON.stringify(pidFile)} } } });
      await new CliRoundTrainer(config.trainer).train(${JSON.stringify(job("out-signal"))}, { label: "replay", logFile: ${JSON.stringify(join(dir, "signal.log"))} });
    `);
    const child = execa(process.execPath, ["--import", "tsx", runner], { cwd: REPO, reject: false });
    await waitFor("the worker started", () => (existsSync(pidFile) && readFileSync(pidFile, "utf8").trim() !== "" ? true : null));
    const worker = Number(readFileSync(pidFile, "utf8"));
    child.kill("SIGTERM");
    expect((await child).signal).toBe("SIGTERM");
    try {
      await waitFor("the worker ended", async () => !alive(worker));
    } finally {
      if (alive(worker)) process.kill(worker, "SIGKILL");
    }
  });

  it("a worker that left the command's group (a session of its own) does not hold the job's end, and is ended after it", async () => {
    const { trainer: t, workerPid } = trainer("escape", null);
    try {
      const stats = await t.train(job("out-escape"), { label: "round 3 attempt 1", logFile: join(dir, "escape.log") });
      expect(stats.rows).toBe(1);
      // out of the group's reach, not of its mark (a torchrun killed at its time limit leaves its workers so): ended
      // before the job returns, so that the next attempt does not start beside it on the GPU
      expect(alive(workerPid())).toBe(false);
    } finally {
      if (alive(workerPid())) process.kill(workerPid(), "SIGKILL");
    }
  });

  it("a daemon's trainer ends at its start what the runs of a daemon killed on its work dir left behind, and nothing else", async () => {
    const mark = `daemon-${randomUUID()}`, run = randomUUID();
    // a worker of a killed daemon's run (its mark), and one of another work dir's daemon; each in a session of its own
    const orphan = execa("sleep", ["600"], { env: { RLLOOP_TRAINER_RUN: `${mark}:${run}` }, detached: true, stdio: "ignore", reject: false });
    const other = execa("sleep", ["600"], { env: { RLLOOP_TRAINER_RUN: `daemon-${randomUUID()}:${run}` }, detached: true, stdio: "ignore", reject: false });
    try {
      // exec'd, their environments readable: found by their marks
      await waitFor("both started", async () => ((await markedProcesses((m) => m.endsWith(`:${run}`))).length === 2 ? true : null));
      const config = parseConfig({ trainer: { command: [script] } });
      await new CliRoundTrainer(config.trainer, { mark, endLeftovers: true }).start();
      await waitFor("the orphan ended", async () => !alive(orphan.pid!));
      expect(alive(other.pid!)).toBe(true);
    } finally {
      orphan.kill("SIGKILL");
      other.kill("SIGKILL");
    }
  });
});
