// Publishing the daemon's events: rejections and round lifecycle go to JetStream (stream RLLOOP_EVENTS) on the
// subject named after their type, with a Nats-Msg-Id so that a restart that repeats a step does not record it
// twice; stats go to core NATS (ephemeral). Statistics travel through the contract's codec (NaN stays NaN).
// Lifecycle events pass through an outbox (event-outbox.ts): published in order, again until JetStream confirms.
import type { JetStreamClient } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import type { Logger } from "pino";
import { EventOutbox, TRY_TIMEOUT_MS } from "./event-outbox.js";
import { encodeWithNonFinite, eventSubject, msgIds, rejectionMessage, subjects, type RolloutRejected, type RoundEvent, type StatsEvent } from "../contract/index.js";

type Without<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never;
export type RoundEventInput = Without<RoundEvent, "policy" | "at">;

export class EventPublisher {
  private readonly subjects: ReturnType<typeof subjects>;
  readonly #outbox: EventOutbox;

  constructor(private readonly nc: NatsConnection, private readonly js: JetStreamClient, private readonly policy: string, private readonly log: Logger) {
    this.subjects = subjects(policy);
    this.#outbox = new EventOutbox((e) => this.js.publish(e.subject, e.data, { msgID: e.msgID, timeout: TRY_TIMEOUT_MS }), log);
  }

  /** Durable; throws when JetStream does not confirm (the caller then keeps the message to judge it again). The
   *  message is bounded (rejectionMessage): one that quotes a rollout near max_payload would never be confirmed. */
  async rejected(event: Omit<RolloutRejected, "type" | "policy" | "at">): Promise<void> {
    const full: RolloutRejected = { type: "rollout.rejected", policy: this.policy, at: new Date().toISOString(), ...event, message: rejectionMessage(event.message) };
    await this.js.publish(this.subjects.rejected, JSON.stringify(full), { msgID: msgIds.rejected(this.policy, event.seq) });
  }

  /** A lifecycle event, stamped now: resolves once it is published or its first tries failed (it is then published
   *  later, in order), at once while earlier ones still wait for NATS. */
  async round(event: RoundEventInput): Promise<void> {
    const full = { ...event, policy: this.policy, at: new Date().toISOString() } as RoundEvent;
    const suffix = "attempt" in full ? `${full.type}.${full.attempt}` : full.type;
    await this.#outbox.send({
      subject: eventSubject(this.policy, full.type), data: encodeWithNonFinite(full),
      msgID: msgIds.round(this.policy, full.round, suffix), label: `${full.type} r${full.round}`,
    });
  }

  /** Lifecycle events not yet published (a gauge). */
  get unpublished(): number {
    return this.#outbox.waiting;
  }

  /** The NATS connection is back: publish what waits now. */
  reconnected(): void {
    this.#outbox.retryNow();
  }

  /** At the stop: what waits gets one more try, 5 s at most; the rest is logged. */
  close(): Promise<void> {
    return this.#outbox.close();
  }

  stats(event: StatsEvent): void {
    try {
      this.nc.publish(this.subjects.stats, encodeWithNonFinite(event));
    } catch (err) {
      this.log.debug({ err }, "stats not published");
    }
  }
}
