// One job at a time between the daemon and its round runner: a closed round, an operator's rollback, or the work
// a killed daemon left (its pending round, an announcement it did not make). A job starts at a safe point only —
// when none runs — with operators' rollbacks before the next round, so a rollback never lands inside a round.
import type { Logger } from "pino";
import type { AdapterRolledBack } from "../contract/index.js";
import type { LoopContext } from "./context.js";
import { setPhase } from "./context.js";
import { isStopRequested } from "./errors.js";
import type { Manifest } from "./manifest.js";
import { isRollbackRefused } from "./rollback.js";
import type { RoundRunner } from "./round-runner.js";
import { RoundBuffer } from "./rounds.js";

interface RollbackRequest {
  toRound: number;
  reason: string;
  resolve: (event: AdapterRolledBack) => void;
  reject: (err: Error) => void;
}

export interface RoundSchedulerOptions {
  ctx: LoopContext;
  runner: RoundRunner;
  /** the number the next closed round gets */
  nextRound: number;
  log: Logger;
  /** a job failed in a way the daemon cannot continue after */
  onFatal(err: Error): void;
  /** a job ended (intake may have been waiting for it) */
  onJobEnd(): void;
}

export class RoundScheduler {
  #running: Promise<void> | null = null;
  #trainingRound: number | null = null;
  #rollbacks: RollbackRequest[] = [];
  #nextRound: number;

  constructor(private readonly options: RoundSchedulerOptions) {
    this.#nextRound = options.nextRound;
  }

  /** the round rollouts arriving now would train in */
  get openRound(): number {
    return this.#nextRound;
  }

  /** the round the running job trains, null when none (or the job is not a round's) */
  get trainingRound(): number | null {
    return this.#trainingRound;
  }

  get busy(): boolean {
    return this.#running !== null;
  }

  /** Resolves when the running job (if any) has ended. */
  async settled(): Promise<void> {
    await this.#running?.catch(() => {});
  }

  /** The first job: the pending round of a killed daemon, or the announcements a killed daemon did not finish. */
  resume(pending: Manifest | null, unfinished: (() => Promise<void>) | null): void {
    const { ctx, runner } = this.options;
    if (pending) {
      for (const e of [...pending.events, ...pending.poisoned]) ctx.reserved.set(e.seq, e.id);
      this.#start(pending.round, async () => {
        await unfinished?.();
        await runner.run(pending);
      });
    } else if (unfinished) {
      this.#start(null, unfinished);
    }
  }

  /** An operator's rollback, done at the next safe point and answered with its announcement. */
  rollback(toRound: number, reason: string): Promise<AdapterRolledBack> {
    return new Promise((resolve, reject) => {
      this.#rollbacks.push({ toRound, reason, resolve, reject });
      this.maybeStart();
    });
  }

  /** Answers the rollbacks still waiting (the daemon stops): refused, so their callers learn it now. */
  refuseWaiting(why: string): void {
    for (const req of this.#rollbacks.splice(0)) req.reject(new Error(why));
  }

  /** Starts the next job when none runs: a waiting rollback, else the open round if it should close. */
  maybeStart(): void {
    const { ctx, runner } = this.options;
    if (ctx.stopping || this.#running) return;
    const rollback = this.#rollbacks.shift();
    if (rollback) return this.#start(null, () => this.#rollBack(rollback));
    const trigger = ctx.buffer.trigger(Date.now(), ctx.config.round);
    if (!trigger) return;
    const entries = ctx.buffer.take(trigger, ctx.config.round, Date.now());
    const round = this.#nextRound++;
    const { groupSize } = ctx.config.round;
    const incomplete = groupSize === null || trigger === "max_wait" ? [] : RoundBuffer.incompleteGroups(entries, groupSize);
    if (incomplete.length > 0) this.options.log.info({ round, groups: incomplete.length, groupSize }, "round takes groups that stalled incomplete (no member came while round.maxWaitS passed or 3 closes left them behind)");
    for (const e of entries) ctx.reserved.set(e.seq, e.id);
    this.#start(round, () => runner.runClosed(round, entries, trigger));
  }

  async #rollBack(req: RollbackRequest): Promise<void> {
    try {
      req.resolve(await this.options.runner.rollBack(req.toRound, req.reason));
    } catch (err) {
      req.reject(err as Error);
      if (!isRollbackRefused(err)) throw err; // a failed commit is the daemon's failure, as a round's is
    }
  }

  #start(round: number | null, job: () => Promise<void>): void {
    const { ctx, log } = this.options;
    this.#trainingRound = round;
    this.#running = job()
      .catch((err: unknown) => {
        // a stop interrupts a round at a safe point: its manifest stays, the next start resumes it
        if (isStopRequested(err) || ctx.stopping) return void log.info({ round, err: (err as Error).message }, "round left for the next start");
        this.options.onFatal(err as Error);
      })
      .finally(() => {
        ctx.reserved.clear();
        this.#running = null;
        this.#trainingRound = null;
        if (!ctx.stopping) setPhase(ctx, "intake");
        this.options.onJobEnd();
        this.maybeStart();
      });
  }
}
