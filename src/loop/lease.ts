// One active daemon per policy: the lease (KV bucket `rlloop`, key `<policy>.lease`, the contract's LeaseRecord).
// The active daemon writes it with a TTL (JetStream per-message TTL) and renews it every third of the TTL, each write
// a compare-and-set on the key's revision. When renewals stop (the daemon was killed, its host is gone), the server
// deletes the key after the TTL — by the server's clock, so no two hosts' clocks are compared — and a standby that
// polls the key takes it. A graceful stop deletes it at once.
//
// The active daemon must not commit without the lease: before each commit it checks that its last renewal is recent
// enough that the lease cannot have expired meanwhile (times taken when the renewal was sent, on this host's
// monotonic clock, which can only make it err on the safe side), and renews first when not. A renewal that finds
// another holder loses the lease: the daemon stops before committing anything. The state record's compare-and-set
// stays the last line: even a write delayed past the TTL cannot commit over another daemon's round.
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { JetStreamApiCodes, type JetStreamClient } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import type { Logger } from "pino";
import { LeaseRecord, leaseKey, STATE_BUCKET } from "../contract/index.js";
import { LeaseError, StopRequestedError } from "./errors.js";
import { isApiError } from "./reconcile.js";

export interface LeaseOptions {
  kv: KV;
  js: JetStreamClient;
  policy: string;
  ttlS: number;
  workDir: string;
  /** wait for a lease held elsewhere (true) or refuse at once (false) */
  standby: boolean;
  /** ends a standby's wait */
  signal: AbortSignal;
  log: Logger;
  /** called once when a renewal finds another holder */
  onLost: (err: LeaseError) => void;
}

export class Lease {
  #revision: number;
  /** monotonic ms until which the lease is surely still ours */
  #validUntil: number;
  #lost: LeaseError | null = null;
  #released = false;
  #renewing: Promise<void> | null = null;
  readonly #timer: NodeJS.Timeout;
  readonly #record: LeaseRecord;

  private constructor(private readonly opts: LeaseOptions, record: LeaseRecord, revision: number, sentAt: number) {
    this.#record = record;
    this.#revision = revision;
    this.#validUntil = sentAt + opts.ttlS * 1000;
    this.#timer = setInterval(() => void this.#renew().catch(() => {}), (opts.ttlS * 1000) / 3);
    this.#timer.unref();
  }

  /** Takes the lease: at once when free, expired, released or held by an earlier daemon on this work dir; else waits
   *  for it (standby) or throws a LeaseError naming the holder. */
  static async acquire(opts: LeaseOptions): Promise<Lease> {
    const now = new Date().toISOString();
    const record: LeaseRecord = {
      version: 1, policy: opts.policy, owner: `${hostname()}:${opts.workDir}`, instance: randomUUID(), host: hostname(),
      pid: process.pid, work_dir: opts.workDir, ttl_s: opts.ttlS, acquired_at: now, renewed_at: now,
    };
    const pollMs = Math.min(1000, (opts.ttlS * 1000) / 5);
    let waitingFor: string | null = null;
    for (;;) {
      try {
        const entry = await opts.kv.get(leaseKey(opts.policy));
        const held = entry?.operation === "PUT" ? LeaseRecord.safeParse(entry.json()) : null;
        const holder = held?.success ? held.data : null;
        if (entry === null || entry.operation !== "PUT" || holder === null || holder.owner === record.owner) {
          const sentAt = performance.now();
          const revision = await write(opts, record, entry?.revision ?? 0);
          opts.log.info({ lease: leaseKey(opts.policy), ttlS: opts.ttlS, ...(holder ? { from: holder.instance } : {}) }, waitingFor ? "lease taken over: this daemon is now the active one" : "lease acquired");
          return new Lease(opts, record, revision, sentAt);
        }
        if (!opts.standby) {
          throw new LeaseError(`policy ${opts.policy} is active on ${holder.host} (work dir ${holder.work_dir}, pid ${holder.pid}, lease renewed ${holder.renewed_at}): ` +
            "start this daemon with --standby (lease.standby) to take over when that one stops, or stop that one first");
        }
        if (waitingFor !== holder.instance) {
          opts.log.info({ holder: { host: holder.host, workDir: holder.work_dir, pid: holder.pid }, ttlS: holder.ttl_s }, "standby: waiting for the lease of the active daemon");
          waitingFor = holder.instance;
        }
      } catch (err) {
        if (err instanceof LeaseError) throw err;
        // another daemon took it first (a lost compare-and-set) or NATS is briefly away: look again
        if (!isApiError(err, JetStreamApiCodes.StreamWrongLastSequence)) opts.log.debug({ err }, "lease not taken; trying again");
      }
      if (opts.signal.aborted) throw new StopRequestedError("stopped while waiting for the lease");
      await sleep(pollMs, opts.signal);
    }
  }

  get revision(): number { return this.#revision; }

  /** Before a commit: resolves when the lease is surely ours for a while; throws a LeaseError when it is lost, or the
   *  renewal's error when it could not be renewed (the caller retries). */
  async assertHeld(): Promise<void> {
    if (this.#lost) throw this.#lost;
    if (this.#released) throw new LeaseError(`the lease of policy ${this.opts.policy} was released`);
    if (performance.now() + (this.opts.ttlS * 1000) / 2 < this.#validUntil) return;
    await this.#renew(true);
    if (this.#lost) throw this.#lost;
  }

  /** Graceful stop: the lease is deleted, so a standby takes over without waiting for the TTL. */
  async release(): Promise<void> {
    clearInterval(this.#timer);
    if (this.#lost || this.#released) return;
    this.#released = true;
    await this.#renewing?.catch(() => {});
    try {
      await this.opts.kv.delete(leaseKey(this.opts.policy), { previousSeq: this.#revision });
      this.opts.log.info("lease released");
    } catch (err) {
      this.opts.log.warn({ err }, "lease not released: it expires after its TTL");
    }
  }

  /** One renewal at a time; `strict` rethrows a failure that is not a loss. */
  async #renew(strict = false): Promise<void> {
    this.#renewing ??= this.#renewOnce().finally(() => (this.#renewing = null));
    const renewing = this.#renewing;
    if (strict) return renewing;
    return renewing.catch(() => {});
  }

  async #renewOnce(): Promise<void> {
    if (this.#lost || this.#released) return;
    const sentAt = performance.now();
    const record = { ...this.#record, renewed_at: new Date().toISOString() };
    try {
      this.#revision = await write(this.opts, record, this.#revision);
      this.#validUntil = sentAt + this.opts.ttlS * 1000;
      return;
    } catch (err) {
      if (!isApiError(err, JetStreamApiCodes.StreamWrongLastSequence)) {
        this.opts.log.warn({ err, validForMs: Math.round(this.#validUntil - performance.now()) }, "lease renewal failed; retrying");
        throw err;
      }
    }
    // the key moved: another daemon holds it, or ours expired (a NATS outage longer than the TTL) and it is free
    const entry = await this.opts.kv.get(leaseKey(this.opts.policy));
    const holder = entry?.operation === "PUT" ? LeaseRecord.safeParse(entry.json()) : null;
    if (holder?.success && holder.data.instance !== this.#record.instance) {
      this.#lose(holder.data);
      return;
    }
    // free again: take it back (had another daemon committed meanwhile, the state record's compare-and-set refuses
    // this daemon's next commit)
    this.#revision = await write(this.opts, record, entry?.revision ?? 0);
    this.#validUntil = sentAt + this.opts.ttlS * 1000;
    this.opts.log.warn("lease had expired (NATS unreachable for longer than lease.ttlS) and was free: taken again");
  }

  #lose(holder: LeaseRecord) {
    clearInterval(this.#timer);
    this.#lost = new LeaseError(`lost the lease of policy ${this.opts.policy} to the daemon on ${holder.host} (work dir ${holder.work_dir}, pid ${holder.pid}): ` +
      "this daemon stops without committing anything");
    this.opts.log.error({ holder: { host: holder.host, workDir: holder.work_dir, pid: holder.pid } }, "lease lost");
    this.opts.onLost(this.#lost);
  }
}

/** A write of the lease key carrying the TTL, compare-and-set on `revision` (0: the key must be empty). */
async function write(opts: LeaseOptions, record: LeaseRecord, revision: number): Promise<number> {
  const ack = await opts.js.publish(`$KV.${STATE_BUCKET}.${leaseKey(opts.policy)}`, JSON.stringify(record), {
    expect: { lastSubjectSequence: revision }, ttl: `${Math.ceil(opts.ttlS)}s`, timeout: Math.max(1000, (opts.ttlS * 1000) / 3),
  });
  return ack.seq;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}
