// The resident trainer: N rank processes (execa, one per GPU, or CPU ranks over Gloo), each keeping the base
// model loaded, taking one job after another over IPC. The daemon keeps one for the life of the loop
// (src/loop/resident-trainer.ts wraps it as its RoundTrainer); `rlloop train --gpus N` (N > 1) starts one for a
// single job.
// Failure rules: a rank that dies, or one that fails a job while the others may be waiting for it inside a
// collective, ends every rank (the group cannot be resynchronised): the job in flight rejects and the trainer is
// closed; its owner starts a new one. A single rank that fails a job stays usable (it has no peers to wait for).
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { execa, type ResultPromise } from "execa";
import getPort from "get-port";
import type { Logger } from "pino";
import type { ModelSpec, TrainJob } from "../contract/index.js";
import { checkedJob, RANK_SPEC_ENV, type FromRank, type RankSpec, type ToRank } from "./rank-protocol.js";
import type { TrainResult } from "./run-job.js";

export interface ResidentOptions {
  model: ModelSpec; // device "cpu" or "cuda" (rank r gets cuda:r)
  ranks: number;
  masterAddr?: string; // default 127.0.0.1
  masterPort?: number; // default: a free port (pickPort's)
  pickPort?: (host: string) => Promise<number>; // how a free port is picked; default get-port (tests hand a taken one)
  env?: Record<string, string>; // extra environment of the rank processes (e.g. CUDA_VISIBLE_DEVICES)
  log: Logger; // its level is the ranks' log level
  startTimeoutMs?: number; // every rank must be ready within this; default: no limit
}

/** How long ranks asked to stop may take to exit before they are killed: a rank between jobs frees its memory and
 *  exits in seconds; one that has not is hung (a collective that never completes, a stopped process). */
export const STOP_GRACE_MS = 30_000;
/** After the kill (SIGTERM, SIGKILL 5 s later), how long to wait for the ranks' exit: a process in uninterruptible
 *  sleep (a wedged GPU driver) does not die even of SIGKILL, and its owner must go on without it. */
export const KILLED_EXIT_WAIT_MS = 15_000;

// "advanced" serialisation (structured clone) keeps NaN and ±Infinity in a rank's statistics; JSON would make them null
type RankProcess = ResultPromise<{ ipc: true; serialization: "advanced"; stdout: "inherit"; stderr: "inherit" }>;

/** Starts on freshly picked ports before giving up, each after another process took the one picked before. */
const PORT_ATTEMPTS = 3;

/** Whether a rank failed to start because the rendezvous port was in use (c10d's bind error names errno 98). */
function portTaken(err: unknown): boolean {
  return err instanceof Error && /EADDRINUSE|address already in use/.test(err.message);
}

/** An error a rank reported or its exit; `rank` says which. */
export class RankError extends Error {
  override readonly name: string;
  constructor(readonly rank: number, message: string, name = "RankError") {
    super(message);
    this.name = name;
  }
}

export class ResidentTrainer {
  private nextId = 0;
  private queue: Promise<unknown> = Promise.resolve();
  private stopping = false;
  private dead: Error | null = null;
  /** Settles when every rank process has exited (after stop() or kill(), or when one died). */
  readonly closed: Promise<void>;

  private constructor(private readonly processes: RankProcess[], private readonly log: Logger) {
    this.closed = Promise.allSettled(processes).then(() => undefined);
    for (const [rank, p] of processes.entries()) {
      p.then(
        () => this.exited(rank, null),
        (err: Error) => this.exited(rank, err),
      );
    }
  }

  /** Starts the ranks and waits until each has loaded the model and joined the group; the first failure ends all. */
  static async start(options: ResidentOptions): Promise<ResidentTrainer> {
    const { masterAddr = "127.0.0.1", masterPort, log, pickPort = (host) => getPort({ host }) } = options;
    // The TCPStore's port is picked free here and bound by rank 0 a moment later: another process can take it in
    // between (tests and trainers starting side by side did). A port this trainer picked is picked again then; one
    // the caller named is the caller's to change.
    for (let attempt = 1; ; attempt++) {
      const port = masterPort ?? (await pickPort(masterAddr));
      try {
        return await ResidentTrainer.startOn(port, options);
      } catch (err) {
        if (masterPort !== undefined || attempt >= PORT_ATTEMPTS || !portTaken(err)) throw err;
        log.warn({ port, attempt }, "the rendezvous port was taken before rank 0 bound it; starting the ranks on another");
      }
    }
  }

  private static async startOn(port: number, { model, ranks, masterAddr = "127.0.0.1", env = {}, log, startTimeoutMs }: ResidentOptions): Promise<ResidentTrainer> {
    const processes = Array.from({ length: ranks }, (_, rank) =>
      startRank({ model: rankModel(model, rank), rank, world: ranks, masterAddr, masterPort: port }, { ...env, RLLOOP_LOG_LEVEL: log.level }),
    );
    const trainer = new ResidentTrainer(processes, log);
    const timer = startTimeoutMs === undefined ? null : setTimeout(() => {
      trainer.kill(new Error(`the ranks did not start within ${startTimeoutMs / 1000} s (trainer.startTimeoutS)`));
    }, startTimeoutMs);
    try {
      await trainer.allAnswer((rank, answer) => {
        if (answer.type === "failed") throw new RankError(rank, `rank ${rank} failed to start: ${answer.error.message}`, answer.error.name);
        if (answer.type !== "ready") throw new RankError(rank, `rank ${rank} answered ${answer.type} before ready`);
      });
    } catch (err) {
      const why = trainer.dead; // the start timeout's reason, when it fired
      trainer.kill();
      await trainer.closed;
      throw why ?? err;
    } finally {
      if (timer !== null) clearTimeout(timer);
    }
    log.info({ ranks, device: model.device }, "resident trainer ready");
    return trainer;
  }

  get ranks(): number {
    return this.processes.length;
  }

  /** Process ids of the ranks, by rank. */
  get pids(): number[] {
    return this.processes.map((p) => p.pid ?? -1);
  }

  /** Why the ranks are gone (null while they run). */
  get failure(): Error | null {
    return this.dead;
  }

  /** Runs one job on every rank; resolves with rank 0's result. Jobs run one at a time, in call order. */
  run(job: TrainJob): Promise<TrainResult> {
    let checked: TrainJob;
    try {
      checked = checkedJob(job); // refused here, the ranks never see it and stay up
    } catch (err) {
      return Promise.reject(err);
    }
    const next = this.queue.then(() => this.runNow(checked));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async runNow(job: TrainJob): Promise<TrainResult> {
    if (this.dead !== null) throw this.dead;
    const id = this.nextId++;
    const results: TrainResult[] = [];
    const answers = this.allAnswer((rank, answer) => {
      if (answer.type !== "result" || answer.id !== id) throw new RankError(rank, `rank ${rank} answered ${answer.type} to job ${id}`);
      if (!answer.ok) throw new RankError(rank, answer.error.message, answer.error.name);
      results[rank] = answer.result;
    });
    try {
      await Promise.all(this.processes.map((_, rank) => this.send(rank, { type: "job", id, job })));
      await answers;
    } catch (err) {
      answers.catch(() => undefined);
      // Peers of a failed rank may be blocked in a collective it will never join: end them all.
      if (this.processes.length > 1) this.kill(err as Error);
      throw this.dead ?? err;
    }
    return results[0]!;
  }

  /**
   * Sends to one rank. A rank that died is reported as exited even when its exit event has not arrived yet: execa
   * then refuses the send (synchronously, "the subprocess is disconnecting"), which this turns into the rank's error.
   */
  private async send(rank: number, message: ToRank): Promise<void> {
    try {
      await this.processes[rank]!.sendMessage(message as never);
    } catch {
      throw this.dead ?? (await this.exitError(rank));
    }
  }

  /** Waits for one message from every rank; rejects at the first rank whose message `check` refuses or that exits. */
  private allAnswer(check: (rank: number, answer: FromRank) => void): Promise<void> {
    return Promise.all(
      this.processes.map(async (p, rank) => {
        let answer: FromRank;
        try {
          answer = (await p.getOneMessage()) as FromRank;
        } catch {
          throw this.dead ?? (await this.exitError(rank));
        }
        check(rank, answer);
      }),
    ).then(() => undefined);
  }

  /** Ends every rank now (SIGTERM, SIGKILL after 5 s); `why` is what later runs reject with. */
  kill(why: Error = new Error("the resident trainer was killed")): void {
    this.dead ??= why;
    for (const p of this.processes) p.kill();
  }

  /** Lets the job in flight finish (later ones are refused), then stops every rank and waits until all have exited;
   *  ranks that have not exited `graceMs` after the stop are killed, and those that outlive even that are left. */
  async stop(graceMs = STOP_GRACE_MS): Promise<void> {
    this.stopping = true;
    this.dead ??= new Error("the resident trainer was stopped");
    // a rank reads its next message only between jobs: a stop sent during one would never be read
    await this.queue;
    await Promise.allSettled(this.processes.map((_, rank) => this.send(rank, { type: "stop" })));
    if (await settlesWithin(this.closed, graceMs)) return;
    this.log.warn({ pids: this.pids, graceS: graceMs / 1000 }, "ranks did not exit after the stop: killing them");
    this.kill();
    await this.exitedAfterKill();
  }

  /** Waits for the ranks' exit after a kill, KILLED_EXIT_WAIT_MS at most; true when they all exited. */
  async exitedAfterKill(): Promise<boolean> {
    if (await settlesWithin(this.closed, KILLED_EXIT_WAIT_MS)) return true;
    const left = this.processes.filter((p) => p.exitCode === null && p.signalCode === null);
    // their handles and IPC channels would keep this process from ever exiting
    for (const p of left) {
      if (p.connected) p.disconnect();
      p.unref();
    }
    this.log.error({ pids: left.map((p) => p.pid) }, "ranks have not exited after SIGKILL (uninterruptible sleep in a driver?): left behind; this process no longer waits for them");
    return false;
  }

  private exited(rank: number, err: Error | null): void {
    if (this.stopping && err === null) return;
    const why = new RankError(rank, `rank ${rank} exited: ${err ? howItEnded(err) : "without being asked to stop"}`);
    if (this.dead === null) this.log.error({ rank, err: why.message }, "rank process exited");
    this.kill(why);
  }

  /**
   * A rank's IPC channel closed (execa rejects the send or the wait for an answer at once): its exit status
   * arrives a moment later, and is what says why (a signal: the OOM killer's SIGKILL, a native crash's SIGSEGV).
   */
  private async exitError(rank: number): Promise<RankError> {
    const settled = this.processes[rank]!.then(() => null, (err: Error) => err);
    const timeout = new Promise<"running">((resolve) => setTimeout(() => resolve("running"), 5000).unref());
    const ended = await Promise.race([settled, timeout]);
    const how = ended === "running" ? "closed its IPC channel" : ended === null ? "exit code 0" : howItEnded(ended);
    return new RankError(rank, `rank ${rank} exited: ${how}`);
  }
}

/** "killed by SIGKILL" or "exit code 3", from execa's error of a process that ended. */
function howItEnded(err: Error): string {
  const { signal, exitCode } = err as Error & { signal?: string; exitCode?: number };
  if (signal) return `killed by ${signal}`;
  if (exitCode !== undefined) return `exit code ${exitCode}`;
  return err.message.split("\n")[0] ?? "unknown";
}

function rankModel(model: ModelSpec, rank: number): ModelSpec {
  return model.device === "cpu" ? model : { ...model, device: `cuda:${rank}` };
}

/** A rank runs rank-process.ts: through tsx when rlloop runs from its TypeScript sources, else the compiled .js. */
function startRank(spec: RankSpec, env: Record<string, string>): RankProcess {
  const here = fileURLToPath(import.meta.url);
  const fromSource = here.endsWith(".ts");
  const entry = join(dirname(here), fromSource ? "rank-process.ts" : "rank-process.js");
  const args = fromSource ? ["--import", "tsx", entry] : [entry];
  return execa(process.execPath, args, {
    ipc: true,
    serialization: "advanced",
    stdout: "inherit",
    stderr: "inherit",
    forceKillAfterDelay: 5000,
    env: { ...env, [RANK_SPEC_ENV]: JSON.stringify(spec) },
  });
}

/** Whether `promise` settles within `ms`. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  const timer = new AbortController();
  const timedOut = sleep(ms, false, { signal: timer.signal, ref: false }).catch(() => false);
  const settled = await Promise.race([promise.then(() => true, () => true), timedOut]);
  timer.abort();
  return settled;
}
