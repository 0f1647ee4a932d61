// The round lifecycle events on their way to JetStream, in order. An event JetStream does not confirm (a NATS
// outage, a server that just restarted) is published again in the background until it is — its Nats-Msg-Id makes a
// repeat harmless — so an outage leaves no hole in a monitor's record of the rounds, while the round that sent it
// waits two short tries at most. An event the server can never take (larger than its max_payload or the stream's
// message size) is dropped with an error, so it cannot hold back the ones behind it.
import { setTimeout as sleep } from "node:timers/promises";
import { JetStreamApiError } from "@nats-io/jetstream";
import { errors as natsErrors } from "@nats-io/nats-core";
import type { Logger } from "pino";

/** Events kept at most; a new one past it is dropped, with a warning. Only a server that refuses events for
 *  thousands of rounds fills it (a round cannot commit while NATS is down: an outage queues a few). */
export const OUTBOX_LIMIT = 10_000;
/** Tries of an event before the round that sent it goes on (a server that just restarted may not answer the first:
 *  it answers "no responders" at once, so the second try waits SECOND_TRY_AFTER_MS), each TRY_TIMEOUT_MS at most;
 *  then the outbox tries again every RETRY_MIN_MS doubling to RETRY_MAX_MS, and at once when the connection comes
 *  back (retryNow). */
const FIRST_TRIES = 2;
const SECOND_TRY_AFTER_MS = 250;
export const TRY_TIMEOUT_MS = 2000;
const RETRY_MIN_MS = 1000;
const RETRY_MAX_MS = 30_000;
/** JetStream's "message size exceeds maximum allowed": the stream will never take it. */
const MESSAGE_TOO_LARGE = 10054;

export interface OutboxEvent {
  subject: string;
  data: string;
  msgID: string;
  /** for logs: "round.trained r3" */
  label: string;
}

interface Queued extends OutboxEvent {
  /** called when the sender need wait no longer: published, its first tries failed, queued behind others, dropped */
  release: () => void;
}

export class EventOutbox {
  readonly #queue: Queued[] = [];
  #draining: Promise<void> = Promise.resolve();
  #active = false;
  readonly #closed = new AbortController();
  /** the wait between two tries, cut short by retryNow() and close() */
  #wait: AbortController | null = null;
  /** the connection came back since the last try began: the next try is now, and the backoff starts again */
  #reconnected = false;
  /** past close()'s grace: no further try */
  #halted = false;

  constructor(private readonly publish: (e: OutboxEvent) => Promise<unknown>, private readonly log: Logger) {}

  /** Queues an event behind those not yet published; resolves once it is published or its first tries failed, and
   *  at once while earlier ones still wait. */
  async send(event: OutboxEvent): Promise<void> {
    if (this.#closed.signal.aborted) {
      this.log.warn({ event: event.label }, "round event not published: sent after the stop began");
      return;
    }
    if (this.#queue.length >= OUTBOX_LIMIT) {
      this.log.warn({ event: event.label, waiting: this.#queue.length }, "round event dropped unpublished: too many wait for NATS");
      return;
    }
    let release = () => {};
    const released = new Promise<void>((resolve) => (release = resolve));
    if (this.#queue.length > 0) release();
    this.#queue.push({ ...event, release });
    this.#kick();
    await released;
  }

  /** Events not yet published. */
  get waiting(): number {
    return this.#queue.length;
  }

  /** The connection is back: try the head now rather than at the end of the current wait. */
  retryNow(): void {
    this.#reconnected = true;
    this.#wait?.abort();
  }

  /** Stops retrying: the head gets one more try (the drain's, if one is running) and, while they succeed, the
   *  events behind it, for `graceMs` at most; a try still in flight then is waited for (it ends within its timeout),
   *  so that nothing is published after close() returns. What is left is logged, not published. */
  async close(graceMs = 5000): Promise<void> {
    this.#closed.abort();
    this.#wait?.abort();
    this.#kick(true);
    await Promise.race([this.#draining, sleep(graceMs, undefined, { ref: false })]);
    this.#halted = true;
    await Promise.race([this.#draining, sleep(TRY_TIMEOUT_MS + 500, undefined, { ref: false })]);
    const left = this.#queue.splice(0);
    for (const e of left) e.release();
    if (left.length > 0) this.log.warn({ events: left.map((e) => e.label) }, "round events not published: NATS did not confirm them before the stop");
  }

  /** Starts a drain unless one runs; once the stop began, only close() starts one (its last). */
  #kick(closing = false): void {
    if (this.#active || this.#queue.length === 0 || this.#halted || (this.#closed.signal.aborted && !closing)) return;
    this.#active = true;
    this.#draining = this.#drain().catch((err: unknown) => this.log.error({ err }, "round events' outbox stopped"));
  }

  /** Publishes the head, then the next, until the queue is empty; a head that fails is tried again after a wait. */
  async #drain(): Promise<void> {
    let delayMs = RETRY_MIN_MS;
    let failures = 0;
    try {
      while (this.#queue.length > 0 && !this.#halted) {
        const head = this.#queue[0]!;
        this.#reconnected = false;
        const { outcome, err } = await this.#try(head);
        if (outcome !== "failed") {
          if (this.#queue[0] === head) this.#queue.shift(); // close() may have emptied the queue meanwhile
          head.release();
          if (outcome === "published" && failures >= FIRST_TRIES) this.log.info({ event: head.label }, "round event published after NATS came back");
          failures = 0;
          delayMs = RETRY_MIN_MS;
          continue;
        }
        if (++failures === FIRST_TRIES) this.log.warn({ err, event: head.label, waiting: this.#queue.length }, "round event not published yet: trying again in the background");
        if (failures >= FIRST_TRIES || this.#closed.signal.aborted) head.release();
        if (this.#closed.signal.aborted) return;
        if (!this.#reconnected) {
          const waitMs = failures < FIRST_TRIES ? SECOND_TRY_AFTER_MS : delayMs;
          if (failures >= FIRST_TRIES) delayMs = Math.min(RETRY_MAX_MS, 2 * delayMs);
          await this.#pause(waitMs);
        }
        if (this.#reconnected) {
          this.#reconnected = false;
          delayMs = RETRY_MIN_MS;
        }
      }
    } finally {
      this.#active = false; // synchronously with the loop's last check: an event sent after it starts a new drain
    }
  }

  /** Waits `ms`, cut short by retryNow() and close(); unref'd: events waiting for NATS never keep the process
   *  alive by themselves. */
  async #pause(ms: number): Promise<void> {
    this.#wait = new AbortController();
    await sleep(ms, undefined, { signal: this.#wait.signal, ref: false }).catch(() => undefined);
    this.#wait = null;
  }

  async #try(head: Queued): Promise<{ outcome: "published" | "failed" | "refused"; err?: unknown }> {
    try {
      await this.publish(head);
      return { outcome: "published" };
    } catch (err) {
      if (!neverTaken(err)) return { outcome: "failed", err };
      this.log.error({ err, event: head.label }, "round event dropped: the server cannot take it");
      return { outcome: "refused", err };
    }
  }
}

/** An event no retry can publish: larger than the connection's max_payload or the stream's maximum message size. */
function neverTaken(err: unknown): boolean {
  return err instanceof natsErrors.InvalidArgumentError || (err instanceof JetStreamApiError && err.code === MESSAGE_TOO_LARGE);
}
