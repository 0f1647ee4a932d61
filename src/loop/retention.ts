// Retention (`retention.rounds`): a daemon that runs for weeks must not fill its disk or its object store with every
// round it trained — a 9B adapter with its optimizer state is ~0.5 GB, and a round's frames come on top; a full disk
// stops the stream. Once `retention.rounds` rounds have committed after it, a round keeps its manifest.json (what
// recovery, the rounds answer and admission read: which sequences it trained) and — while the state record names its
// adapter (the one served, the lineage a rollback can go back to) — its adapter folder. The rest goes: frames/,
// train.jsonl, rollouts.jsonl, attempts' leftovers, and an adapter no record names, here and in rlloop-adapters (where
// its manifest object stays). Housekeeping runs beside the rounds after each commit and stops with the daemon; a
// failure is logged and the next commit tries again: nothing it does can fail a round.
import { readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import type { ObjectStore } from "@nats-io/obj";
import type { Logger } from "pino";
import { adapterObjectPrefix } from "../contract/index.js";
import { writeFileAtomic } from "../files.js";
import { CONTINUATION_FILES } from "./continuation.js";
import { readManifest } from "./manifest.js";
import { policyDir, roundDir } from "./paths.js";
import type { StateRecord } from "./state.js";

/** What a pruned round's folder keeps: its manifest, and while the record names its adapter, the adapter (and a
 *  download of it in progress: continuation.ts fetches into `adapter.fetch-<pid>`). */
const KEPT_FILE = "manifest.json";
const ADAPTER_ENTRY = /^adapter(\.fetch-\d+)?$/;
/** Beside the round folders: the last round pruned, so that a restart does not look at every old round again. */
const CURSOR_FILE = "retention.json";
/** Rounds pruned between two writes of the cursor (a sweep of thousands of rounds, after an upgrade, is stopped
 *  with the daemon and goes on from there). */
const CURSOR_EVERY = 32;

export interface RetentionOptions {
  workDir: string;
  policy: string;
  /** committed rounds kept whole after the last; null = everything */
  rounds: number | null;
  adapters: ObjectStore;
  log: Logger;
  /** aborted when the daemon stops: a sweep ends between two rounds */
  stop: AbortSignal;
}

export class Retention {
  /** rounds up to this one were pruned (read from CURSOR_FILE at the first sweep) */
  #prunedUpTo: number | null = null;
  /** pruned rounds whose adapter a record named then: pruned again once none does */
  readonly #keptAdapters = new Set<number>();
  #running: Promise<void> | null = null;
  #next: StateRecord | null = null;

  constructor(private readonly opts: RetentionOptions) {}

  /** After a commit that wrote `record`: prunes in the background, one sweep at a time (the newest record wins). */
  afterCommit(record: StateRecord): void {
    if (this.opts.rounds === null) return;
    this.#next = record;
    this.#running ??= this.#drain().finally(() => (this.#running = null));
  }

  /** Resolves when no sweep runs (a stop aborts one between two rounds, then waits for it). */
  async settled(): Promise<void> {
    await this.#running;
  }

  async #drain(): Promise<void> {
    for (let record = this.#next; record !== null && !this.opts.stop.aborted; record = this.#next) {
      this.#next = null;
      try {
        await this.#sweep(record);
      } catch (err) {
        this.opts.log.warn({ err, round: record.round }, "retention: old rounds not pruned now; tried again after the next commit");
      }
    }
  }

  async #sweep(record: StateRecord): Promise<void> {
    const upTo = record.round - (this.opts.rounds as number);
    const named = new Set([record.adapter.round, ...record.lineage.map((e) => e.round)]);
    this.#prunedUpTo ??= await this.#readCursor(record.round);
    // adapters kept for a record that no longer names them, then every round that dropped out of the window
    const due = [...this.#keptAdapters].filter((r) => !named.has(r));
    for (let round = this.#prunedUpTo + 1; round <= upTo; round++) due.push(round);
    let since = 0;
    for (const round of due) {
      if (this.opts.stop.aborted) break;
      await this.#prune(round, named.has(round));
      if (round > this.#prunedUpTo) this.#prunedUpTo = round;
      if (++since === CURSOR_EVERY) {
        await this.#writeCursor();
        since = 0;
      }
    }
    if (since > 0) await this.#writeCursor();
    if (due.length > 0) this.opts.log.debug({ upTo, looked: due.length, adaptersKept: [...this.#keptAdapters] }, "retention: old rounds pruned");
  }

  async #prune(round: number, keepAdapter: boolean): Promise<void> {
    const dir = roundDir(this.opts.workDir, this.opts.policy, round);
    // a folder with a manifest not committed is recovery's; one without any holds only a downloaded adapter at most
    const manifest = await readManifest(dir).catch(() => null);
    if (manifest !== null && manifest.status !== "committed") return;
    if (!keepAdapter) await this.#deleteStoredAdapter(round);
    const entries = await readdir(dir).catch(() => [] as string[]);
    const gone = entries.filter((name) => name !== KEPT_FILE && !(keepAdapter && ADAPTER_ENTRY.test(name)));
    await Promise.all(gone.map((name) => rm(join(dir, name), { recursive: true, force: true })));
    if (keepAdapter) this.#keptAdapters.add(round);
    else this.#keptAdapters.delete(round);
  }

  /** The round's adapter files in rlloop-adapters (its manifest object stays); absent ones are nothing to do. */
  async #deleteStoredAdapter(round: number): Promise<void> {
    const prefix = adapterObjectPrefix(this.opts.policy, round);
    for (const name of CONTINUATION_FILES) {
      const info = await this.opts.adapters.info(`${prefix}/${name}`);
      if (info !== null && !info.deleted) await this.opts.adapters.delete(`${prefix}/${name}`);
    }
  }

  /** The cursor as the last sweep left it; 0 where there is none, it is unreadable, or it is not below the record's
   *  round (a work dir kept while the state was reset: its rounds are pruned again from the start). */
  async #readCursor(committed: number): Promise<number> {
    let value: unknown;
    try {
      value = (JSON.parse(await readFile(this.#cursorFile(), "utf8")) as { pruned_up_to?: unknown }).pruned_up_to;
    } catch {
      return 0; // none yet, or unreadable: every round is looked at once
    }
    if (typeof value !== "number" || !Number.isInteger(value) || value < 0) return 0;
    if (value >= committed) {
      this.opts.log.warn({ cursor: value, round: committed }, `retention: ${CURSOR_FILE} is ahead of the committed round: every round is looked at again`);
      return 0;
    }
    return value;
  }

  /** Rounds kept for their adapter are at or below the cursor: a restart must look at them again. */
  async #writeCursor(): Promise<void> {
    const upTo = Math.min(this.#prunedUpTo ?? 0, ...[...this.#keptAdapters].map((r) => r - 1));
    await writeFileAtomic(this.#cursorFile(), `${JSON.stringify({ pruned_up_to: upTo })}\n`);
  }

  #cursorFile(): string {
    return join(policyDir(this.opts.workDir, this.opts.policy), CURSOR_FILE);
  }
}
