// Publishing the daemon's events: rejections and round lifecycle go to JetStream (stream RLLOOP_EVENTS) on the
// subject named after their type, with a Nats-Msg-Id so that a restart that repeats a step does not record it
// twice; stats go to core NATS (ephemeral). Statistics travel through the contract's codec (NaN stays NaN).
// Lifecycle events pass through an outbox, in order: one that JetStream does not confirm is published again in the
// background until it is (the Nats-Msg-Id makes a repeat harmless), so a NATS outage leaves no hole in a monitor's
// record of the rounds, and a round never waits on its events beyond two short tries.
import { setTimeout as sleep } from "node:timers/promises";
import type { JetStreamClient } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import type { Logger } from "pino";
import { encodeWithNonFinite, eventSubject, msgIds, subjects, type RolloutRejected, type RoundEvent, type StatsEvent } from "../contract/index.js";

type Without<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never;
export type RoundEventInput = Without<RoundEvent, "policy" | "at">;

/** Lifecycle events kept for publishing at most; past it the oldest is dropped, with a warning (days of outage). */
const OUTBOX_LIMIT = 10_000;
/** A lifecycle event's tries before the round that sent it goes on (a server that just restarted may not answer the
 *  first), each this long at most; then the outbox tries again every RETRY_MIN_MS doubling to RETRY_MAX_MS. */
const FIRST_TRIES = 2;
const TRY_TIMEOUT_MS = 2000;
const RETRY_MIN_MS = 1000;
const RETRY_MAX_MS = 30_000;

interface Pending {
  subject: string;
  data: string;
  msgID: string;
  type: RoundEvent["type"];
  round: number;
  /** called once it is published or its first tries failed: what round() waits for */
  settle: () => void;
}

export class EventPublisher {
  private readonly subjects: ReturnType<typeof subjects>;
  readonly #outbox: Pending[] = [];
  #draining: Promise<void> | null = null;
  readonly #closed = new AbortController();

  constructor(private readonly nc: NatsConnection, private readonly js: JetStreamClient, private readonly policy: string, private readonly log: Logger) {
    this.subjects = subjects(policy);
  }

  /** Durable; throws when JetStream does not confirm (the caller then keeps the message to judge it again). */
  async rejected(event: Omit<RolloutRejected, "type" | "policy" | "at">): Promise<void> {
    const full: RolloutRejected = { type: "rollout.rejected", policy: this.policy, at: new Date().toISOString(), ...event };
    await this.js.publish(this.subjects.rejected, JSON.stringify(full), { msgID: msgIds.rejected(this.policy, event.seq) });
  }

  /** Queues a lifecycle event (stamped now) behind those not yet published; resolves once it is published or its
   *  first tries failed (then it is published later, in order), at once while earlier ones still wait for NATS. */
  async round(event: RoundEventInput): Promise<void> {
    const full = { ...event, policy: this.policy, at: new Date().toISOString() } as RoundEvent;
    const suffix = "attempt" in full ? `${full.type}.${full.attempt}` : full.type;
    let settle = () => {};
    const settled = new Promise<void>((resolve) => (settle = resolve));
    const pending: Pending = {
      subject: eventSubject(this.policy, full.type), data: encodeWithNonFinite(full), msgID: msgIds.round(this.policy, full.round, suffix),
      type: full.type, round: full.round, settle,
    };
    if (this.#outbox.length > 0) settle(); // behind events that wait for NATS: do not wait too
    this.#outbox.push(pending);
    if (this.#outbox.length > OUTBOX_LIMIT) {
      const dropped = this.#outbox.shift()!;
      dropped.settle();
      this.log.warn({ event: dropped.type, round: dropped.round, kept: OUTBOX_LIMIT }, "round event dropped unpublished: too many wait for NATS");
    }
    void this.#kick();
    await settled;
  }

  /** Stops retrying: what waits gets one more try each, in order, until one fails; what is left is logged (a stop
   *  during an outage: those events are not recorded). */
  async close(): Promise<void> {
    this.#closed.abort(); // cuts a wait between two tries short: the drain ends at its next failure
    await this.#draining;
    await this.#kick();
    const left = this.#outbox.splice(0);
    for (const p of left) p.settle();
    if (left.length > 0) this.log.warn({ events: left.map((p) => `${p.type} r${p.round}`) }, "round events not published: NATS did not confirm them before the stop");
  }

  /** The drain in progress, or a new one when events wait. */
  #kick(): Promise<void> {
    if (this.#outbox.length > 0) this.#draining ??= this.#drain().finally(() => (this.#draining = null));
    return this.#draining ?? Promise.resolve();
  }

  /** Publishes the outbox head first, in order, until it is empty or the publisher is closed. */
  async #drain(): Promise<void> {
    let delayMs = RETRY_MIN_MS;
    let failures = 0;
    while (this.#outbox.length > 0) {
      const head = this.#outbox[0]!;
      try {
        await this.js.publish(head.subject, head.data, { msgID: head.msgID, timeout: TRY_TIMEOUT_MS });
        this.#outbox.shift();
        head.settle();
        if (failures >= FIRST_TRIES) this.log.info({ event: head.type, round: head.round }, "round event published after NATS came back");
        failures = 0;
        delayMs = RETRY_MIN_MS;
        continue;
      } catch (err) {
        failures++;
        if (failures === FIRST_TRIES) this.log.warn({ err, event: head.type, round: head.round, waiting: this.#outbox.length }, "round event not published yet: trying again in the background");
        if (failures >= FIRST_TRIES || this.#closed.signal.aborted) head.settle();
      }
      if (this.#closed.signal.aborted) return;
      if (failures < FIRST_TRIES) continue;
      // unref'd: events waiting for NATS never keep the process alive by themselves
      await sleep(delayMs, undefined, { signal: this.#closed.signal, ref: false }).catch(() => undefined);
      delayMs = Math.min(RETRY_MAX_MS, 2 * delayMs);
    }
  }

  stats(event: StatsEvent): void {
    try {
      this.nc.publish(this.subjects.stats, encodeWithNonFinite(event));
    } catch (err) {
      this.log.debug({ err }, "stats not published");
    }
  }
}
