// The intake loop with backpressure: pulls messages from the consumer and hands each to admission, at most
// ADMIT_CONCURRENCY judged at once, and none while the open round is full and another round trains (the buffer
// must not grow without bound behind a slow trainer). Stopping: the consumer stops, then drained() waits for the
// loop and for every judgement in flight.
import type { JsMsg } from "@nats-io/jetstream";
import type { Intake } from "./intake.js";

/** Messages judged at once: frames decode on libuv's pool while the next message is parsed. */
const ADMIT_CONCURRENCY = 4;
/** How long a wait for capacity lasts at most before the conditions are read again (a wake-up may be missed). */
const RECHECK_MS = 500;

export interface IntakePumpOptions {
  intake: Intake;
  admit(msg: JsMsg): Promise<void>;
  stopping(): boolean;
  /** the open round could close and a round trains: wait */
  full(): boolean;
  /** after each judgement (a round may be ready to close) */
  afterAdmit(): void;
}

export class IntakePump {
  #inflight = 0;
  #idle: Promise<void> = Promise.resolve();
  #resolveIdle: () => void = () => {};
  #wake: (() => void) | null = null;
  #loop: Promise<void> | null = null;

  constructor(private readonly options: IntakePumpOptions) {}

  start(): void {
    this.#loop ??= this.#run();
  }

  /** Reads the capacity conditions again now (a round ended, the daemon stops). */
  wake(): void {
    this.#wake?.();
  }

  /** Resolves once the loop ended (the consumer stopped) and no judgement is in flight. */
  async drained(): Promise<void> {
    this.wake();
    await this.#loop;
    await this.#idle;
  }

  async #run(): Promise<void> {
    for await (const msg of this.options.intake.messages()) {
      if (this.options.stopping()) break;
      await this.#capacity();
      if (this.#inflight++ === 0) this.#idle = new Promise((r) => (this.#resolveIdle = r));
      void this.#admit(msg);
    }
  }

  async #admit(msg: JsMsg): Promise<void> {
    try {
      await this.options.admit(msg);
    } finally {
      if (--this.#inflight === 0) this.#resolveIdle();
      this.options.afterAdmit();
      this.wake();
    }
  }

  async #capacity(): Promise<void> {
    const { stopping, full } = this.options;
    while (!stopping() && (this.#inflight >= ADMIT_CONCURRENCY || full())) {
      await new Promise<void>((r) => {
        this.#wake = r;
        setTimeout(r, RECHECK_MS);
      });
    }
  }
}
