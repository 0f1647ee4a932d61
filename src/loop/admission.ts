// Admission of one rollouts message into the open round (DESIGN.md data flow steps 1-2): route redeliveries
// (already applied → ack, resolved by rejection → term, being judged, reserved by the training round or already
// buffered → hold the new handle), then judge it: validate (bounded: validate.ts), check the serving adapter and
// the id, materialise the frames into incoming/ and buffer. The message is held (kept alive) from the moment it is
// judged, so a slow judgement is not redelivered meanwhile. Never throws. How a judgement ends:
//   - something is wrong with the rollout → rejected with its reason (recorded on rlloop.<policy>.rollout.rejected,
//     then terminated);
//   - a transient failure (NATS, the host's I/O) → nak'd with a backoff of 5 s doubling to 5 min, judged again;
//   - another copy of its id pending (being judged, or in the open or training round) → nak'd with the same backoff
//     until that copy trained (then this one is a duplicate) or was rejected for its own fault (then this one is
//     judged on its own); a copy of an id in a round waits only while it holds nothing back (waitingRoom) and would
//     not leave the stream meanwhile — else it is rejected `duplicate_id` at once;
//   - any other failure → rejected `unjudgeable` (it would fail the same way again);
//   - a transient failure of a message delivered more than intake.maxDeliveries times, after this daemon's last
//     FAILURES_BEFORE_GIVING_UP judgements of it failed too, while the waiting messages hold the stream (the
//     consumer at its max_ack_pending, others behind) → rejected `undeliverable` with its last error; and so is one
//     that would leave the stream (stream.maxAgeS) before its next judgement, rather than vanish without a record.
// So no message can pin the consumer's max_ack_pending for ever, and none is rejected for a fault not its own while
// it holds nothing back: short of that, a rollout waits for the host or the configuration as long as it takes. The
// delivery count alone is never a reason: restarts and outages redeliver good rollouts too (each restart
// redelivers the open round), and one that judges fine is admitted however often it was delivered.
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { JsMsg } from "@nats-io/jetstream";
import { rejectionMessage, type Manifest, type RejectReason, type RolloutCompleted } from "../contract/index.js";
import { redeliveryDelayMs } from "./backoff.js";
import { setDegraded, setHealthy, type LoopContext } from "./context.js";
import { HostFaultError, IdPendingError, isRolloutRejected, isTransient, RolloutRejectedError } from "./errors.js";
import { ObjectStallError } from "./object-chunks.js";
import type { FrameObjects } from "./frame-objects.js";
import type { FrameRoots } from "./frame-roots.js";
import { frameBytes, withoutInlineFrames, writeFramePng, type FrameLimits } from "./frames.js";
import { maxAckPending, waitingRoom, type ConsumerState } from "./intake.js";
import { frameFileName, incomingDir } from "./paths.js";
import { checkAdapter } from "./staleness.js";
import { pausePoint } from "./test-hooks.js";
import { idOf, parseRollout, validateContext, type ValidateContext } from "./validate.js";

/** Last errors of messages nak'd for a transient failure, kept for the `undeliverable` rejection's message: at least
 *  this many, and at least twice the consumer's max_ack_pending (every waiting message is pending there). */
const LAST_ERRORS_KEPT = 10_000;
/** Failed judgements in a row, by this daemon, before a message delivered too often is given up on. */
const FAILURES_BEFORE_GIVING_UP = 3;
/** Committed manifests whose sequences are kept once read (a few kB each). */
const MANIFESTS_KEPT = 64;

export class Admission {
  /** rollout id → stream sequence of messages being judged */
  readonly #inflightIds = new Map<string, number>();
  /** stream sequence → the last transient error of its judgement, and how many in a row failed here */
  readonly #lastErrors = new Map<number, { message: string; failures: number }>();
  /** committed round → the sequences it trained, by its manifest (null: gone or unreadable); rounds older than those
   *  kept in memory (#trained) */
  readonly #manifests = new Map<number, ReadonlySet<number> | null>();
  /** stream sequences of copies nak'd to wait for the round holding another copy of their id */
  readonly #waitingOnRound = new Set<number>();
  readonly #limits: FrameLimits;
  readonly #incoming: string;
  readonly #validate: ValidateContext;
  readonly #kept: number;
  readonly #room: ReturnType<typeof waitingRoom>;
  /** waiting messages that failed FAILURES_BEFORE_GIVING_UP judgements in a row or more, and the last such error */
  #stuck = 0;
  #lastStuckError = "";

  constructor(
    private readonly ctx: LoopContext, roots: FrameRoots, frameObjects: (() => Promise<FrameObjects>) | null,
    private readonly openRound: () => number, private readonly consumer: () => Promise<ConsumerState | null>,
    private readonly committedManifest: (round: number) => Promise<Manifest | null>,
  ) {
    const f = ctx.config.frames;
    this.#limits = { roots, maxBytes: f.maxBytes, maxPixels: f.maxPixels, objects: frameObjects };
    this.#incoming = incomingDir(ctx.config.workDir, ctx.policy);
    this.#validate = validateContext(ctx.config);
    this.#kept = Math.max(LAST_ERRORS_KEPT, 2 * maxAckPending(ctx.config));
    this.#room = waitingRoom(ctx.config);
  }

  async admit(msg: JsMsg): Promise<void> {
    this.#stopWaitingOnRound(msg.seq);
    if (this.#routeRedelivery(msg)) return;
    this.ctx.held.hold(msg);
    const deliveries = msg.info.deliveryCount;
    try {
      await this.#judge(msg);
      this.#forgetError(msg.seq);
    } catch (err) {
      if (isRolloutRejected(err)) return this.#reject(msg, err.reason, err.message);
      if (err instanceof IdPendingError) return this.#awaitOtherCopy(msg, err);
      if (!isTransient(err)) return this.#reject(msg, "unjudgeable", `${(err as Error)?.name ?? "Error"}: ${String((err as Error)?.message ?? err).slice(0, 300)}`);
      const failures = this.#rememberError(msg.seq, (err as Error).message);
      const delayMs = redeliveryDelayMs(deliveries);
      const giveUp = await this.#whyGiveUp(msg, failures, delayMs);
      if (giveUp !== null) {
        this.#forgetError(msg.seq);
        return this.#reject(msg, "undeliverable", `${giveUp}; last error: ${String((err as Error).message).slice(0, 300)}`);
      }
      // the first failure and the one that makes it a lasting fault (degraded) at error; the redeliveries between and
      // after at debug: thousands may wait on one fault, and health and rlloop_rollouts_waiting already say so
      const level = failures === 1 || failures === FAILURES_BEFORE_GIVING_UP ? "error" : "debug";
      this.ctx.log[level]({ err, seq: msg.seq, deliveries, failures, retryInMs: delayMs }, "cannot admit rollout now; will be redelivered");
      this.ctx.held.nak([msg.seq], delayMs);
    }
  }

  /**
   * Why a message whose judgement failed for a transient reason (`failures` in a row here) is given up on now, or
   * null to wait: it would leave the stream (stream.maxAgeS) before its next judgement — rejected, so that it is not
   * lost without a record — or it was delivered more than intake.maxDeliveries times and the waiting messages hold
   * the stream: the consumer at its max_ack_pending (read now: the rounds' counts move), others behind it, and room
   * for them without the waiting ones. Short of these it waits, however long the host or the configuration takes.
   */
  async #whyGiveUp(msg: JsMsg, failures: number, delayMs: number): Promise<string | null> {
    const { config } = this.ctx;
    const ageMs = Date.now() - msg.info.timestampNanos / 1e6;
    if (ageMs + delayMs >= 0.9 * config.stream.maxAgeS * 1000) {
      return `its judgement has failed for ${Math.round(ageMs / 1000)} s: it would leave the stream (stream.maxAgeS ${config.stream.maxAgeS} s) before its next one`;
    }
    const deliveries = msg.info.deliveryCount;
    const { maxDeliveries } = config.intake;
    if (deliveries <= maxDeliveries || failures < FAILURES_BEFORE_GIVING_UP) return null;
    const c = await this.consumer();
    if (c === null || c.maxAckPending <= 0 || c.ackPending < c.maxAckPending || c.numPending === 0) return null;
    if (c.ackPending - this.#lastErrors.size >= c.maxAckPending) return null; // the rounds' own messages hold it
    // copies waiting on their id's round give way first: each is rejected at its next judgement while the stream is held
    if (this.#waitingOnRound.size > 0 && c.ackPending - this.#waitingOnRound.size < c.maxAckPending) return null;
    return `delivered ${deliveries} times (intake.maxDeliveries ${maxDeliveries}), its last ${failures} judgements failed, and the rollouts waiting hold the stream (max_ack_pending ${c.maxAckPending} reached, ${c.numPending} behind)`;
  }

  /** True when the message was already handled under this sequence. */
  #routeRedelivery(msg: JsMsg): boolean {
    const { ctx } = this;
    const seq = msg.seq;
    if (ctx.applied.hasSeq(seq)) {
      msg.ack();
      return true;
    }
    if (ctx.rejectedSeqs.has(seq)) {
      msg.term();
      return true;
    }
    // in the training round, in the open round, or being judged right now: keep the newest handle
    if (ctx.reserved.has(seq) || ctx.buffer.has(seq) || ctx.held.has(seq)) {
      ctx.held.hold(msg);
      return true;
    }
    return false;
  }

  async #judge(msg: JsMsg): Promise<void> {
    const { ctx } = this;
    // a committed round's message redelivered after its ack was lost, older than intake.dedupRounds rounds (a
    // consumer re-created from an old ack floor): applied already, acked, never counted again. Looked for before any
    // judgement: a rollout trained long ago is stale now, and a configuration tightened since may refuse it.
    if (await this.#committedAlready(idOf(msg.data, ctx.config.limits.maxDepth, Infinity), msg.seq)) return this.#ackCommitted(msg);
    const rollout = parseRollout(msg.data, this.#validate);
    checkAdapter(rollout.adapter, ctx.state.record, ctx.config.offPolicy.maxStaleness, msg.seq);
    this.#claimId(rollout.id, msg.seq);
    try {
      await this.#checkNotConsumed(rollout.id, msg.seq);
      await this.#materialise(rollout, msg.seq);
      if (ctx.stopping) return ctx.held.nak([msg.seq]);
      const now = Date.now();
      ctx.buffer.add({ seq: msg.seq, id: rollout.id, group: rollout.group, rows: rollout.steps.length, rollout: withoutInlineFrames(rollout), arrivedAt: now }, now);
      ctx.metrics.accepted.inc();
      ctx.metrics.acceptedRows.inc(rollout.steps.length);
      ctx.tally.acceptedRows += rollout.steps.length;
    } finally {
      this.#inflightIds.delete(rollout.id);
    }
    if (ctx.buffer.size >= 2) await pausePoint("intake", this.openRound(), ctx.log);
  }

  /** The id must not be consumed by a committed round; another copy of it in the open or training round, or being
   *  judged under another sequence, may yet be rejected for what is wrong with it alone: this one waits. Claimed
   *  synchronously, so that two copies judged at once cannot both pass. */
  #claimId(id: string, seq: number) {
    const { ctx } = this;
    if (ctx.applied.hasId(id)) throw duplicateId(id, seq, "consumed by a committed round");
    const quoted = JSON.stringify(id);
    const inRound = [...ctx.reserved].find(([, reservedId]) => reservedId === id)?.[0] ?? ctx.buffer.seqOf(id);
    if (inRound !== undefined) throw new IdPendingError(`rollout id ${quoted} (seq ${seq}) was already taken into a round under stream sequence ${inRound}`, true);
    const inflight = this.#inflightIds.get(id);
    if (inflight !== undefined && inflight !== seq) throw new IdPendingError(`rollout id ${quoted} (seq ${seq}) is being judged under stream sequence ${inflight}`, false);
    this.#inflightIds.set(id, seq);
  }

  /** Judged again once the other copy's judgement or round has ended, with the redeliveries' backoff (that one may
   *  wait on a host's fault for long); its failures are not counted: nothing failed here. A copy of an id in a round
   *  that cannot wait for it is a duplicate now, as it would most likely be after. */
  async #awaitOtherCopy(msg: JsMsg, err: IdPendingError): Promise<void> {
    const delayMs = redeliveryDelayMs(msg.info.deliveryCount);
    this.#forgetError(msg.seq); // its own judgement no longer fails
    if (err.inRound) {
      const cannotWait = this.#whyNotWaitForRound(msg, delayMs);
      if (cannotWait !== null) return this.#reject(msg, "duplicate_id", `${err.message}, and ${cannotWait}`);
      this.#waitingOnRound.add(msg.seq);
      this.ctx.metrics.copiesWaiting.set(this.#waitingOnRound.size);
    }
    // the first wait at info; the redeliveries after it at debug: thousands of copies may wait, the gauges say so
    const level = msg.info.deliveryCount === 1 ? "info" : "debug";
    this.ctx.log[level]({ seq: msg.seq, retryInMs: delayMs }, `${err.message}; judged again in ${Math.round(delayMs / 1000)} s`);
    this.ctx.held.nak([msg.seq], delayMs);
  }

  /**
   * Why a copy of an id in a round does not wait for that round's end, or null. It holds a place in max_ack_pending,
   * and copies of ids in the open round that hold the stream could keep that round from ever filling (no
   * round.maxWaitS): it waits only while the rollouts waiting fit their room (waitingRoom; intake's backpressure keeps
   * the rounds' own messages within theirs). It must be judged again while the id memory keeps the other copy's commit
   * (intake.duplicateWindowS), and before it would leave the stream (stream.maxAgeS). Settled messages no redelivery
   * will clear from the set (gone from the stream) are below the ack floor.
   */
  #whyNotWaitForRound(msg: JsMsg, delayMs: number): string | null {
    const { config } = this.ctx;
    const ageMs = Date.now() - msg.info.timestampNanos / 1e6;
    if (ageMs + delayMs >= 0.9 * config.stream.maxAgeS * 1000) return `it would leave the stream (stream.maxAgeS ${config.stream.maxAgeS} s) before its next judgement`;
    if (delayMs >= 0.5 * config.intake.duplicateWindowS * 1000) return `its next judgement, in ${Math.round(delayMs / 1000)} s, could come after the id memory forgot that round (intake.duplicateWindowS ${config.intake.duplicateWindowS} s)`;
    if (this.#room.room === 0) return `no room is kept for rollouts to wait (${this.#room.setting})`;
    if (this.#waitingOnRound.size + this.#lastErrors.size >= this.#room.room) {
      for (const s of this.#waitingOnRound) if (s <= this.ctx.ackFloor) this.#stopWaitingOnRound(s);
    }
    const waiting = this.#waitingOnRound.size + this.#lastErrors.size;
    if (waiting >= this.#room.room) return `the ${waiting} rollouts waiting fill the room for them (${this.#room.setting})`;
    return null;
  }

  #stopWaitingOnRound(seq: number): void {
    if (this.#waitingOnRound.delete(seq)) this.ctx.metrics.copiesWaiting.set(this.#waitingOnRound.size);
  }

  /** Nor consumed under another sequence within intake.duplicateWindowS (the KV memory, across restarts): recorded by
   *  a committed round that trained it. An entry of a round not committed (a dead daemon's, taken over without its
   *  folder: that message is redelivered and judged again), or of a round whose number its successor committed
   *  without it, consumed nothing: this copy is judged on its own. */
  async #checkNotConsumed(id: string, seq: number): Promise<void> {
    const consumed = await this.ctx.consumedIds.lookup(id);
    if (consumed === null || consumed.seq === seq) return;
    if (consumed.round !== null && !(consumed.round <= this.ctx.state.record.round && (await this.#trained(consumed.round, consumed.seq)))) {
      this.ctx.log.info({ seq, id, recorded: consumed }, "rollout id recorded by a round that did not train it: not a duplicate");
      return;
    }
    throw duplicateId(id, seq, `consumed under stream sequence ${consumed.seq} (within intake.duplicateWindowS)`);
  }

  /**
   * Whether the message's round committed: its id recorded under this very sequence by a round the committed record
   * includes, and that round trained it. A round whose ids were recorded but whose commit did not happen is pending:
   * its messages are reserved by a daemon that has its folder, and judged again by one that has not (a standby). An id
   * recorded without its round is judged by the record's last sequence, which a pending round's message can be below.
   */
  async #committedAlready(id: string | null, seq: number): Promise<boolean> {
    const { record } = this.ctx.state;
    if (id === null || seq > record.last_seq) return false;
    const consumed = await this.ctx.consumedIds.lookup(id);
    if (consumed === null || consumed.seq !== seq) return false;
    if (consumed.round === null) return true;
    return consumed.round <= record.round && this.#trained(consumed.round, seq);
  }

  /**
   * Whether committed round `round` trained `seq`: its ids may have been recorded by a daemon that died before its
   * commit, and the round of that number committed by its successor with other rollouts — acked as committed, this
   * one would be lost. The last intake.dedupRounds rounds from memory, older ones from their committed manifest; one
   * that cannot be read leaves the ids' word.
   */
  async #trained(round: number, seq: number): Promise<boolean> {
    const seqs = this.ctx.applied.seqsOf(round) ?? (await this.#manifestSeqs(round));
    return seqs === null || seqs.has(seq);
  }

  /** The sequences committed round `round` trained, by its manifest (read once: a backlog of one old round's
   *  redeliveries reads it once), or null where it is gone or unreadable. A read NATS does not answer now is retried
   *  with the message, never taken as an answer. */
  async #manifestSeqs(round: number): Promise<ReadonlySet<number> | null> {
    if (this.#manifests.has(round)) return this.#manifests.get(round)!;
    let seqs: ReadonlySet<number> | null;
    try {
      const manifest = await this.committedManifest(round);
      seqs = manifest === null ? null : new Set(manifest.events.map((e) => e.seq));
    } catch (err) {
      if (isTransient(err)) throw err;
      if (err instanceof ObjectStallError) throw new HostFaultError(`round ${round}'s committed manifest: ${err.message}`, { cause: err });
      this.ctx.log.error({ err, round }, "committed manifest unreadable: the ids recorded for its round are trusted");
      seqs = null;
    }
    this.#manifests.set(round, seqs);
    if (this.#manifests.size > MANIFESTS_KEPT) this.#manifests.delete(this.#manifests.keys().next().value as number);
    return seqs;
  }

  async #ackCommitted(msg: JsMsg): Promise<void> {
    this.ctx.log.info({ seq: msg.seq }, "redelivered rollout of a committed round acked");
    await this.ctx.held.ack([msg.seq]);
  }

  /** All steps at once (decoding runs on libuv's pool, a rollout's frames overlap); the reported failure is the
   *  first failing step by index, so the reason does not depend on timing. */
  async #materialise(rollout: RolloutCompleted, seq: number) {
    await mkdir(this.#incoming, { recursive: true });
    const results = await Promise.allSettled(rollout.steps.map(async (step, k) => {
      const bytes = await frameBytes(step.image, this.#limits);
      await writeFramePng(bytes, join(this.#incoming, frameFileName(seq, k)), this.#limits);
    }));
    const k = results.findIndex((r) => r.status === "rejected");
    if (k < 0) return;
    // the frames that did succeed belong to no round: do not leave them in incoming/
    await Promise.all(rollout.steps.map((_, i) => rm(join(this.#incoming, frameFileName(seq, i)), { force: true })));
    const err = (results[k] as PromiseRejectedResult).reason as unknown;
    if (isRolloutRejected(err)) throw new RolloutRejectedError(err.reason, `step ${k}: ${err.message}`, { cause: err });
    throw err;
  }

  async #reject(msg: JsMsg, reason: RejectReason, why: string): Promise<void> {
    const { ctx } = this;
    const message = rejectionMessage(why); // as the event carries it; the log line says the same
    try {
      await ctx.events.rejected({ seq: msg.seq, id: idOf(msg.data, ctx.config.limits.maxDepth), reason, message });
    } catch (err) {
      // not recorded: leave the message to be redelivered and judged again (a NATS outage: transient)
      ctx.log.warn({ err, seq: msg.seq, reason }, "rejection not recorded; will retry on redelivery");
      this.#rememberError(msg.seq, `${reason}: ${message}`);
      ctx.held.nak([msg.seq], redeliveryDelayMs(msg.info.deliveryCount));
      return;
    }
    this.#forgetError(msg.seq);
    ctx.rejectedSeqs.add(msg.seq);
    ctx.metrics.rejected.inc({ reason });
    ctx.tally.rejected++;
    ctx.log.info({ seq: msg.seq, reason, message }, "rollout rejected");
    ctx.held.term([msg.seq], reason);
  }

  /** Records a failed judgement; how many in a row failed in this daemon. */
  #rememberError(seq: number, message: string): number {
    const failures = (this.#lastErrors.get(seq)?.failures ?? 0) + 1;
    this.#dropError(seq);
    this.#lastErrors.set(seq, { message: message.slice(0, 300), failures });
    if (failures >= FAILURES_BEFORE_GIVING_UP) {
      this.#stuck++;
      this.#lastStuckError = message.slice(0, 300);
    }
    if (this.#lastErrors.size > this.#kept) {
      // settled meanwhile without a judgement here (acked elsewhere, gone from the stream): below the ack floor
      for (const s of this.#lastErrors.keys()) if (s <= this.ctx.ackFloor) this.#dropError(s);
      if (this.#lastErrors.size > this.#kept) this.#dropError(this.#lastErrors.keys().next().value as number);
    }
    this.#waitingChanged();
    return failures;
  }

  /** The message's judgement ended (admitted or rejected): it no longer waits. */
  #forgetError(seq: number): void {
    if (this.#dropError(seq)) this.#waitingChanged();
  }

  #dropError(seq: number): boolean {
    const entry = this.#lastErrors.get(seq);
    if (entry === undefined) return false;
    if (entry.failures >= FAILURES_BEFORE_GIVING_UP) this.#stuck--;
    return this.#lastErrors.delete(seq);
  }

  /** The gauge, and `degraded` while any rollout has failed FAILURES_BEFORE_GIVING_UP judgements in a row here (a
   *  fault that lasts, not a blip): an operator must see that rollouts wait, and why. */
  #waitingChanged(): void {
    const { ctx } = this;
    ctx.metrics.rolloutsWaiting.set(this.#lastErrors.size);
    const n = this.#stuck;
    if (n === 0) return setHealthy(ctx, "intake");
    setDegraded(ctx, `${n} rollout${n === 1 ? "" : "s"} failed to be judged ${FAILURES_BEFORE_GIVING_UP} times in a row for a reason not theirs, waiting (nak'd); last error: ${this.#lastStuckError}`, "intake");
  }
}

function duplicateId(id: string, seq: number, where: string): RolloutRejectedError {
  return new RolloutRejectedError("duplicate_id", `rollout id ${JSON.stringify(id)} (seq ${seq}) was already ${where}`);
}
