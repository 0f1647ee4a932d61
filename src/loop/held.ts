// Messages the daemon holds unacked until their round commits (DESIGN.md reliability rule 1). A timer calls
// working() on each so JetStream does not redeliver them while the round buffers and trains; a redelivered copy
// replaces the held handle (same stream sequence). After the commit they are acked with ackAck (the double ack:
// the server confirms); a lost ack is harmless, the redelivery is recognised as already applied.
import type { JsMsg } from "@nats-io/jetstream";
import type { Logger } from "pino";

export class HeldMessages {
  readonly #msgs = new Map<number, JsMsg>();
  readonly #timer: NodeJS.Timeout;

  constructor(ackWaitS: number, private readonly log: Logger) {
    // three keep-alives per ack_wait survive one lost working() and a slow event loop
    this.#timer = setInterval(() => this.#keepAlive(), Math.max(200, (ackWaitS * 1000) / 3));
    this.#timer.unref();
  }

  get size(): number { return this.#msgs.size; }
  has(seq: number): boolean { return this.#msgs.has(seq); }

  /** Hold (or replace the handle of) a message. */
  hold(msg: JsMsg): void {
    this.#msgs.set(msg.seq, msg);
  }

  /** Ack with server confirmation; returns the count confirmed. Unconfirmed ones are redelivered and re-acked later. */
  async ack(seqs: readonly number[]): Promise<number> {
    let confirmed = 0;
    const batch = 64;
    for (let i = 0; i < seqs.length; i += batch) {
      const results = await Promise.allSettled(seqs.slice(i, i + batch).map((seq) => this.#ackOne(seq)));
      confirmed += results.filter((r) => r.status === "fulfilled" && r.value).length;
    }
    return confirmed;
  }

  async #ackOne(seq: number): Promise<boolean> {
    const msg = this.#msgs.get(seq);
    if (!msg) return false;
    this.#msgs.delete(seq);
    try {
      return await msg.ackAck({ timeout: 5000 });
    } catch (err) {
      this.log.debug({ err, seq }, "ack not confirmed; the redelivery will be acked as already applied");
      return false;
    }
  }

  /** Terminate with a reason the server records in its advisory (the rejection event has the whole message). */
  term(seqs: readonly number[], reason?: string): void {
    for (const seq of seqs) {
      this.#msgs.get(seq)?.term(reason);
      this.#msgs.delete(seq);
    }
  }

  /** Ask for redelivery, immediately or after `delayMs` (graceful shutdown, a transient failure). */
  nak(seqs: readonly number[], delayMs?: number): void {
    for (const seq of seqs) {
      this.#msgs.get(seq)?.nak(delayMs);
      this.#msgs.delete(seq);
    }
  }

  release(): void {
    clearInterval(this.#timer);
  }

  #keepAlive() {
    for (const msg of this.#msgs.values()) {
      try {
        msg.working();
      } catch {
        // disconnected: the server redelivers after ack_wait and the redelivery replaces this handle
      }
    }
  }
}
