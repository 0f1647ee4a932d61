// Admission of one rollouts message into the open round (DESIGN.md data flow steps 1-2): route redeliveries
// (already applied → ack, resolved by rejection → term, being judged, reserved by the training round or already
// buffered → hold the new handle), then validate, check the serving adapter and the id, materialise the frames
// into incoming/ and buffer. The message is held (kept alive) from the moment it is judged, so a slow judgement
// (a rejection waiting for JetStream through an outage) is not redelivered meanwhile. A bad event is recorded on
// rlloop.<policy>.rejected and terminated; an internal failure (disk, object store unreachable) naks the message
// for a later retry. Never throws.
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { JsMsg } from "@nats-io/jetstream";
import type { ObjectStore } from "@nats-io/obj";
import type { LoopContext } from "./context.js";
import { isRolloutRejected, RolloutRejectedError } from "./errors.js";
import { frameBytes, writeFramePng, type FrameLimits } from "./frames.js";
import { frameFileName, incomingDir } from "./paths.js";
import type { RejectReason, RolloutCompleted } from "./schema.js";
import { checkAdapter } from "./staleness.js";
import { pausePoint } from "./test-hooks.js";
import { idOf, parseRollout } from "./validate.js";

export class Admission {
  /** rollout id → stream sequence of messages being judged */
  readonly #inflightIds = new Map<string, number>();
  readonly #limits: FrameLimits;
  readonly #incoming: string;

  constructor(private readonly ctx: LoopContext, frameObjects: (() => Promise<ObjectStore>) | null, private readonly openRound: () => number) {
    const f = ctx.config.frames;
    this.#limits = { roots: f.roots, maxBytes: f.maxBytes, maxPixels: f.maxPixels, objects: frameObjects };
    this.#incoming = incomingDir(ctx.config.workDir, ctx.policy);
  }

  async admit(msg: JsMsg): Promise<void> {
    if (this.#routeRedelivery(msg)) return;
    this.ctx.held.hold(msg);
    try {
      await this.#judge(msg);
    } catch (err) {
      if (isRolloutRejected(err)) return this.#reject(msg, err.reason, err.message);
      this.ctx.log.error({ err, seq: msg.seq }, "cannot admit rollout now; will be redelivered");
      this.ctx.held.nak([msg.seq], 5000);
    }
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
    const rollout = parseRollout(msg.data, { policy: ctx.policy, codeLength: ctx.config.policy.codeLength, maxSteps: ctx.config.policy.maxSteps });
    checkAdapter(rollout.adapter, ctx.state.record, ctx.config.offPolicy.maxStaleness);
    this.#checkDuplicate(rollout.id, msg.seq);
    this.#inflightIds.set(rollout.id, msg.seq);
    try {
      await this.#materialise(rollout, msg.seq);
      if (ctx.stopping) return ctx.held.nak([msg.seq]);
      ctx.buffer.add({ seq: msg.seq, id: rollout.id, group: rollout.group, rows: rollout.steps.length, rollout }, Date.now());
      ctx.metrics.accepted.inc();
      ctx.metrics.acceptedRows.inc(rollout.steps.length);
      ctx.tally.acceptedRows += rollout.steps.length;
    } finally {
      this.#inflightIds.delete(rollout.id);
    }
    if (ctx.buffer.size >= 2) await pausePoint("intake", this.openRound(), ctx.log);
  }

  #checkDuplicate(id: string, seq: number) {
    const { ctx } = this;
    const reservedId = [...ctx.reserved.values()].includes(id);
    const inflight = this.#inflightIds.get(id);
    if (ctx.applied.hasId(id) || reservedId || ctx.buffer.hasId(id) || (inflight !== undefined && inflight !== seq)) {
      throw new RolloutRejectedError("duplicate_id", `rollout id ${JSON.stringify(id)} (seq ${seq}) was already consumed under another stream sequence`);
    }
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

  async #reject(msg: JsMsg, reason: RejectReason, message: string): Promise<void> {
    const { ctx } = this;
    try {
      await ctx.events.rejected({ seq: msg.seq, id: idOf(msg.data), reason, message });
    } catch (err) {
      // not recorded: leave the message to be redelivered and judged again
      ctx.log.warn({ err, seq: msg.seq, reason }, "rejection not recorded; will retry on redelivery");
      ctx.held.nak([msg.seq], 2000);
      return;
    }
    ctx.rejectedSeqs.add(msg.seq);
    ctx.metrics.rejected.inc({ reason });
    ctx.tally.rejected++;
    ctx.log.info({ seq: msg.seq, reason, message }, "rollout rejected");
    ctx.held.term([msg.seq]);
  }
}
