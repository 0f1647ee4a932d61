// Publishes simulated rollouts (or the malformed-event table) to JetStream subject rlloop.<policy>.rollouts with
// Nats-Msg-Id = the rollout id. Ids are deterministic in (runTag, index), so re-running the same simulation within
// the stream's duplicate window publishes nothing new: the PubAck says `duplicate` and it is counted as such.
import { setTimeout as sleep } from "node:timers/promises";
import type { JetStreamClient } from "@nats-io/jetstream";
import { subjects, type RejectReason } from "../../contract/index.js";
import { badEvents, type BadEventContext } from "./bad-events.js";
import { frameStore } from "./frame-store.js";
import { buildRollout, type FrameSink, type RolloutOptions } from "./rollout.js";

export interface SimulateOptions extends RolloutOptions {
  /** number of rollouts to publish */
  count: number;
  /** index of the first rollout (resume a simulation, or extend one) */
  start: number;
  /** rollouts per second; null = as fast as JetStream acks */
  rate: number | null;
  /** write frames under this root and send {path}; null = inline png_base64 */
  frameRoot: string | null;
}

export interface PublishedRollout {
  id: string;
  group: string | undefined;
  seq: number;
  duplicate: boolean;
  reward: number;
  steps: number;
}

export interface SimulateSummary {
  published: number;
  duplicates: number;
  rows: number;
  firstSeq: number | null;
  lastSeq: number | null;
}

export interface PublishHooks {
  signal?: AbortSignal;
  onPublished?: (rollout: PublishedRollout) => void;
}

export async function publishRollouts(js: JetStreamClient, opts: SimulateOptions, hooks: PublishHooks = {}): Promise<SimulateSummary> {
  const subject = subjects(opts.policy).rollouts;
  const sink: FrameSink = opts.frameRoot === null ? { kind: "inline" } : { kind: "path", store: frameStore(opts.frameRoot) };
  const summary: SimulateSummary = { published: 0, duplicates: 0, rows: 0, firstSeq: null, lastSeq: null };
  const began = performance.now();
  for (let n = 0; n < opts.count; n++) {
    if (hooks.signal?.aborted) break;
    if (opts.rate !== null) await waitForSlot(began, n, opts.rate, hooks.signal);
    const event = await buildRollout(opts, opts.start + n, sink);
    const ack = await js.publish(subject, JSON.stringify(event), { msgID: event.id });
    summary.published += ack.duplicate ? 0 : 1;
    summary.duplicates += ack.duplicate ? 1 : 0;
    summary.rows += ack.duplicate ? 0 : event.steps.length;
    summary.firstSeq ??= ack.seq;
    summary.lastSeq = ack.seq;
    hooks.onPublished?.({ id: event.id, group: event.group, seq: ack.seq, duplicate: ack.duplicate, reward: event.reward, steps: event.steps.length });
  }
  return summary;
}

export interface PublishedBadEvent {
  label: string;
  expect: RejectReason;
  what: string;
  id: string;
  seq: number;
  duplicate: boolean;
}

/** Publishes every case of the malformed-event table once; returns what the daemon should reject and why. */
export async function publishBadEvents(js: JetStreamClient, opts: SimulateOptions, ctx: Omit<BadEventContext, "valid" | "runTag" | "frameRoot">): Promise<PublishedBadEvent[]> {
  const subject = subjects(opts.policy).rollouts;
  // Inline frames in the base rollout: the image cases then break exactly one frame and leave the others valid.
  const valid = await buildRollout(opts, opts.start, { kind: "inline" });
  const cases = await badEvents({ ...ctx, valid, runTag: opts.runTag, frameRoot: opts.frameRoot });
  const out: PublishedBadEvent[] = [];
  for (const c of cases) {
    const ack = await js.publish(subject, c.payload, { msgID: c.id });
    out.push({ label: c.label, expect: c.expect, what: c.what, id: c.id, seq: ack.seq, duplicate: ack.duplicate });
  }
  return out;
}

/** Rollout n is due at began + n / rate seconds: a steady rate without drift from slow frames. */
async function waitForSlot(began: number, n: number, rate: number, signal: AbortSignal | undefined): Promise<void> {
  const due = began + (n / rate) * 1000;
  const wait = due - performance.now();
  if (wait > 0) await sleep(wait, undefined, { signal }).catch(() => undefined);
}
