// The durable pull consumer on RLLOOP_ROLLOUTS for one policy (DESIGN.md data flow step 1), as an async iterable
// of raw JetStream messages. It creates the consumer when missing, re-creates it when deleted (starting after
// the last known ack floor, so nothing unresolved is skipped), and keeps pulling through reconnects. Validation,
// frames and rounds happen in the daemon; this file only owns the consumer's lifecycle.
import { setTimeout as sleep } from "node:timers/promises";
import { AckPolicy, DeliverPolicy, type ConsumerConfig, type ConsumerMessages, type JetStreamClient, type JetStreamManager, type JsMsg } from "@nats-io/jetstream";
import { nanos } from "@nats-io/nats-core";
import type { Logger } from "pino";
import type { Config } from "./config/index.js";
import { JetStreamApiCodes, JetStreamApiError } from "@nats-io/jetstream";
import { ConfigError } from "./errors.js";
import { isApiError } from "./reconcile.js";
import { consumerName, ROLLOUT_STREAM, subjects } from "../contract/index.js";

const PULL_EXPIRES_MS = 10_000;

export interface IntakeOptions {
  policy: string;
  consumer: Config["consumer"];
  round: Config["round"];
  /** where a (re-)created consumer starts: the first sequence not yet resolved */
  startSeq: () => number;
}

export interface ConsumerState {
  ackFloor: number;
  /** messages handed out unacked */
  ackPending: number;
  maxAckPending: number;
  /** messages not yet handed out */
  numPending: number;
}

/** Messages the consumer may hand out unacked: the training round, the open round, one fetch batch, slack, and the
 *  rollouts waiting on a transient fault (each nak'd with a delay stays pending: without room for them, a fault
 *  that holds a few hundred rollouts would stop the server handing out the rollouts it does not touch). */
export function maxAckPending(opts: Pick<IntakeOptions, "consumer" | "round">): number {
  const { consumer } = opts;
  return consumer.maxAckPending ?? roundsPending(opts) + consumer.waitingRollouts;
}

/** Of maxAckPending, the room for rollouts that wait (nak'd, still pending) beside the rounds' own messages: those
 *  waiting on a fault not theirs, and copies waiting on their id's other copy's round. Beyond it they hold the
 *  stream. */
export function waitingRoom(opts: Pick<IntakeOptions, "consumer" | "round">): { room: number; setting: string } {
  const { consumer } = opts;
  if (consumer.maxAckPending === null) return { room: consumer.waitingRollouts, setting: `consumer.waitingRollouts ${consumer.waitingRollouts}` };
  const rounds = roundsPending(opts);
  return { room: Math.max(0, consumer.maxAckPending - rounds), setting: `consumer.maxAckPending ${consumer.maxAckPending} less the rounds' own ${rounds}` };
}

/** The training round, the open round, one fetch batch and slack. */
function roundsPending({ consumer, round }: Pick<IntakeOptions, "consumer" | "round">): number {
  return 2 * round.rows + 2 * consumer.fetchBatch + 64;
}

export class Intake {
  #messages: ConsumerMessages | null = null;
  #stopped = false;
  readonly name: string;

  constructor(private readonly js: JetStreamClient, private readonly jsm: JetStreamManager, private readonly opts: IntakeOptions, private readonly log: Logger) {
    this.name = consumerName(opts.policy);
  }

  consumerConfig(startSeq: number): Partial<ConsumerConfig> {
    const config: Partial<ConsumerConfig> = {
      durable_name: this.name,
      ack_policy: AckPolicy.Explicit,
      ack_wait: nanos(this.opts.consumer.ackWaitS * 1000),
      max_ack_pending: maxAckPending(this.opts),
      // never drop a message after N deliveries: every rollout ends in a round or a rejection
      max_deliver: -1,
      filter_subjects: [subjects(this.opts.policy).rollouts],
    };
    return startSeq > 1 ? { ...config, deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: startSeq } : { ...config, deliver_policy: DeliverPolicy.All };
  }

  /**
   * Create the durable consumer when missing; bring ack_wait, max_ack_pending and the filter subjects in line with
   * the config (a log line names each change; a change the server refuses is a ConfigError).
   */
  async ensureConsumer(): Promise<void> {
    const wanted = this.consumerConfig(this.opts.startSeq());
    let current: ConsumerConfig;
    try {
      current = (await this.jsm.consumers.info(ROLLOUT_STREAM, this.name)).config;
    } catch (err) {
      if (!isApiError(err, JetStreamApiCodes.ConsumerNotFound)) throw err;
      this.log.info({ startSeq: wanted.opt_start_seq ?? 1 }, "creating consumer");
      await this.jsm.consumers.add(ROLLOUT_STREAM, wanted);
      return;
    }
    // the server keeps a one-subject list as filter_subject
    const filters = current.filter_subjects ?? (current.filter_subject ? [current.filter_subject] : []);
    const changes: Record<string, { from: unknown; to: unknown }> = {};
    if (current.ack_wait !== wanted.ack_wait) changes.ack_wait = { from: current.ack_wait, to: wanted.ack_wait };
    if (current.max_ack_pending !== wanted.max_ack_pending) changes.max_ack_pending = { from: current.max_ack_pending, to: wanted.max_ack_pending };
    // a delivery limit an operator set would leave a good rollout delivered that often unacked for ever, with no record
    if ((current.max_deliver ?? -1) !== wanted.max_deliver) changes.max_deliver = { from: current.max_deliver, to: wanted.max_deliver };
    if (filters.join(" ") !== (wanted.filter_subjects ?? []).join(" ")) changes.filter_subjects = { from: filters, to: wanted.filter_subjects };
    if (Object.keys(changes).length === 0) return;
    try {
      await this.jsm.consumers.update(ROLLOUT_STREAM, this.name, {
        ack_wait: wanted.ack_wait, max_ack_pending: wanted.max_ack_pending, filter_subjects: wanted.filter_subjects, max_deliver: wanted.max_deliver,
      });
    } catch (cause) {
      if (!(cause instanceof JetStreamApiError)) throw cause;
      throw new ConfigError(`consumer ${this.name}: the server refused to change ${Object.keys(changes).join(", ")}: ${cause.message} (JetStream error ${cause.code})`, { cause });
    }
    this.log.info({ consumer: this.name, changes }, `consumer ${this.name} updated to the config: ${Object.keys(changes).join(", ")}`);
  }

  /** Messages until stop(). Survives reconnects (the client re-pulls) and consumer deletion (re-created here). */
  async *messages(): AsyncGenerator<JsMsg> {
    while (!this.#stopped) {
      try {
        await this.ensureConsumer();
        const consumer = await this.js.consumers.get(ROLLOUT_STREAM, this.name);
        // pulls that expire after 10 s (heartbeats every 5 s): a consumer whose leader died (a cluster node lost) is
        // pulled from its new leader within ~10 s, not after the default 30 s
        this.#messages = await consumer.consume({ max_messages: this.opts.consumer.fetchBatch, expires: PULL_EXPIRES_MS });
        // a stop() while it was being opened closed the one before (or none): this one would wait for a message.
        // stop(), not close(): close() resolves once an iteration has seen the stop, and none will iterate this one
        if (this.#stopped) {
          this.#messages.stop();
          break;
        }
        void this.#watch(this.#messages);
        for await (const msg of this.#messages) yield msg;
      } catch (err) {
        if (this.#stopped) break;
        this.log.warn({ err }, "consumer failed; re-creating");
        await sleep(1000);
      }
    }
  }

  /** A deleted consumer is re-created, then this consume is closed so messages() opens a fresh one at once
   *  (the old one would only notice after its pull expired, ~30 s). */
  async #watch(messages: ConsumerMessages) {
    for await (const status of messages.status()) {
      if (this.#stopped) return;
      if (status.type === "consumer_deleted" || status.type === "consumer_not_found") {
        this.log.warn({ status: status.type }, "consumer gone; re-creating");
        try {
          await this.ensureConsumer();
          await messages.close();
          return;
        } catch (err) {
          this.log.warn({ err }, "consumer re-creation failed; retrying on the next notification");
        }
      }
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#messages?.close();
  }

  async ackFloor(): Promise<number | null> {
    return (await this.consumerState())?.ackFloor ?? null;
  }

  /** The consumer by the server's count: its ack floor, the messages it has handed out unacked and its limit on
   *  them; null while the server does not answer. */
  async consumerState(): Promise<ConsumerState | null> {
    try {
      const info = await this.jsm.consumers.info(ROLLOUT_STREAM, this.name);
      return { ackFloor: info.ack_floor.stream_seq, ackPending: info.num_ack_pending, maxAckPending: info.config.max_ack_pending ?? -1, numPending: info.num_pending };
    } catch {
      return null;
    }
  }
}
