// Publishing the daemon's events: rejections and round lifecycle go to JetStream (stream RLLOOP_EVENTS) on the
// subject named after their type, with a Nats-Msg-Id so that a restart that repeats a step does not record it
// twice; stats go to core NATS (ephemeral). Statistics travel through the contract's codec (NaN stays NaN).
import type { JetStreamClient } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import type { Logger } from "pino";
import { encodeWithNonFinite, eventSubject, msgIds, subjects, type RolloutRejected, type RoundEvent, type StatsEvent } from "../contract/index.js";

type Without<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never;
export type RoundEventInput = Without<RoundEvent, "policy" | "at">;

export class EventPublisher {
  private readonly subjects: ReturnType<typeof subjects>;

  constructor(private readonly nc: NatsConnection, private readonly js: JetStreamClient, private readonly policy: string, private readonly log: Logger) {
    this.subjects = subjects(policy);
  }

  /** Durable; throws when JetStream does not confirm (the caller then keeps the message to judge it again). */
  async rejected(event: Omit<RolloutRejected, "type" | "policy" | "at">): Promise<void> {
    const full: RolloutRejected = { type: "rollout.rejected", policy: this.policy, at: new Date().toISOString(), ...event };
    await this.js.publish(this.subjects.rejected, JSON.stringify(full), { msgID: msgIds.rejected(this.policy, event.seq) });
  }

  /** Lifecycle events are informational: two short tries (a server that just restarted may not answer the
   *  first), then a logged warning — a round never waits long for its own announcement. */
  async round(event: RoundEventInput): Promise<void> {
    const full = { ...event, policy: this.policy, at: new Date().toISOString() } as RoundEvent;
    const suffix = "attempt" in full ? `${full.type}.${full.attempt}` : full.type;
    const data = encodeWithNonFinite(full);
    for (let attempt = 1; attempt <= 2; attempt++) {
      try {
        await this.js.publish(eventSubject(this.policy, full.type), data, { msgID: msgIds.round(this.policy, full.round, suffix), timeout: 2000 });
        return;
      } catch (err) {
        if (attempt === 2) this.log.warn({ err, event: full.type, round: full.round }, "round event not published");
      }
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
