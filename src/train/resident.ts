// The resident trainer: N rank processes (execa, one per GPU, or CPU ranks over Gloo), each keeping the base
// model loaded, taking one job after another over IPC. The daemon keeps one for the life of the loop (its
// RoundTrainer in src/loop/trainer.ts wraps it); `rlloop train --gpus N` (N > 1) starts one for a single job.
// A rank that dies rejects the job in flight and closes the trainer; the daemon restarts it.
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { execa, type ResultPromise } from "execa";
import type { Logger } from "pino";
import type { ModelSpec, TrainJob } from "./job.js";
import { RANK_SPEC_ENV, type FromRank, type RankSpec, type ToRank } from "./rank-protocol.js";
import type { TrainResult } from "./run-job.js";

export interface ResidentOptions {
  model: ModelSpec; // device "cpu" or "cuda" (rank r gets cuda:r)
  ranks: number;
  masterAddr?: string; // default 127.0.0.1
  masterPort?: number; // default: a free port
  log: Logger;
}

type RankProcess = ResultPromise<{ ipc: true; serialization: "json"; stdout: "inherit"; stderr: "inherit" }>;

export class ResidentTrainer {
  private nextId = 0;
  private queue: Promise<unknown> = Promise.resolve();
  /** Settles when every rank process has exited (after stop(), or when one died). */
  readonly closed: Promise<void>;

  private constructor(private readonly processes: RankProcess[], private readonly log: Logger) {
    this.closed = Promise.allSettled(processes).then(() => undefined);
    for (const [rank, p] of processes.entries()) {
      p.catch((err: Error) => {
        log.error({ rank, err: err.message }, "rank process exited");
        for (const other of processes) other.kill();
      });
    }
  }

  /** Starts the ranks and waits until each has loaded the model and joined the group. */
  static async start({ model, ranks, masterAddr = "127.0.0.1", masterPort, log }: ResidentOptions): Promise<ResidentTrainer> {
    const port = masterPort ?? (await freePort());
    const processes = Array.from({ length: ranks }, (_, rank) =>
      startRank({ model: rankModel(model, rank), rank, world: ranks, masterAddr, masterPort: port }),
    );
    const trainer = new ResidentTrainer(processes, log);
    const answers = await Promise.all(processes.map((p) => p.getOneMessage() as Promise<FromRank>));
    const failed = answers.find((a) => a.type === "failed");
    if (failed?.type === "failed") {
      await trainer.stop();
      throw Object.assign(new Error(`rank ${failed.rank} failed to start: ${failed.error.message}`), { name: failed.error.name });
    }
    log.info({ ranks, device: model.device }, "resident trainer ready");
    return trainer;
  }

  /** Runs one job on every rank; resolves with rank 0's result. Jobs run one at a time, in call order. */
  run(job: TrainJob): Promise<TrainResult> {
    const next = this.queue.then(() => this.runNow(job));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async runNow(job: TrainJob): Promise<TrainResult> {
    const id = this.nextId++;
    const replies = this.processes.map((p) => p.getOneMessage() as Promise<FromRank>);
    await Promise.all(this.processes.map((p) => p.sendMessage({ type: "job", id, job } satisfies ToRank as never)));
    const answers = await Promise.all(replies);
    const bad = answers.find((a) => a.type === "result" && !a.ok);
    if (bad?.type === "result" && !bad.ok) {
      throw Object.assign(new Error(bad.error.message), { name: bad.error.name, rank: bad.rank });
    }
    const first = answers[0]!;
    if (first.type !== "result" || !first.ok) throw new Error(`rank 0 answered ${first.type} to job ${id}`);
    return first.result;
  }

  async stop(): Promise<void> {
    await Promise.allSettled(this.processes.map((p) => p.sendMessage({ type: "stop" } satisfies ToRank as never)));
    await this.closed;
  }
}

function rankModel(model: ModelSpec, rank: number): ModelSpec {
  return model.device === "cpu" ? model : { ...model, device: `cuda:${rank}` };
}

/** A rank runs rank-process.ts: through tsx when rlloop runs from its TypeScript sources, else the compiled .js. */
function startRank(spec: RankSpec): RankProcess {
  const here = fileURLToPath(import.meta.url);
  const fromSource = here.endsWith(".ts");
  const entry = join(dirname(here), fromSource ? "rank-process.ts" : "rank-process.js");
  const args = fromSource ? ["--import", "tsx", entry] : [entry];
  return execa(process.execPath, args, {
    ipc: true,
    serialization: "json",
    stdout: "inherit",
    stderr: "inherit",
    env: { [RANK_SPEC_ENV]: JSON.stringify(spec) },
  });
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}
