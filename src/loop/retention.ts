// Retention (`retention.rounds`): a daemon that runs for weeks must not fill its disk or its object store with every
// round it trained — a 9B adapter with its optimizer state is ~0.5 GB, and a round's frames come on top; a full disk
// stops the stream. Once `retention.rounds` rounds have committed after it, a round keeps its manifest.json (what
// recovery, the rounds answer and admission read: which sequences it trained) and — while the state record names its
// adapter (the one served, the lineage a rollback can go back to) — its adapter folder. The rest goes: frames/,
// train.jsonl, rollouts.jsonl, attempts' leftovers, and an adapter no record names, here and in rlloop-adapters (where
// its manifest object stays). Housekeeping runs beside the rounds after each commit; a failure is logged and the
// next commit tries again: nothing it does can fail a round.
import { readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import type { ObjectStore } from "@nats-io/obj";
import type { Logger } from "pino";
import { adapterObjectPrefix } from "../contract/index.js";
import { writeFileAtomic } from "../files.js";
import { CONTINUATION_FILES } from "./continuation.js";
import { readManifest } from "./manifest.js";
import { policyDir, roundDir, ROUND_DIR_NAME } from "./paths.js";
import type { StateRecord } from "./state.js";

/** What a pruned round's folder keeps (and its adapter/ while the record names it). */
const KEPT_FILE = "manifest.json";
const ADAPTER_DIR = "adapter";
/** Beside the round folders: the last round pruned, so that a restart does not visit every old round again. */
const CURSOR_FILE = "retention.json";

export interface RetentionOptions {
  workDir: string;
  policy: string;
  /** committed rounds kept whole after the last; null = everything */
  rounds: number | null;
  adapters: ObjectStore;
  log: Logger;
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

  /** Resolves when no sweep runs (a stop waits for it: nothing is left half-deleted that matters, but logs end). */
  async settled(): Promise<void> {
    await this.#running;
  }

  async #drain(): Promise<void> {
    for (let record = this.#next; record !== null; record = this.#next) {
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
    const named = namedRounds(record);
    this.#prunedUpTo ??= await this.#readCursor();
    const after = this.#prunedUpTo;
    const due = (await this.#committedFolders(after, upTo)).concat([...this.#keptAdapters].filter((r) => !named.has(r)));
    for (const round of new Set(due)) await this.#prune(round, named.has(round));
    if (upTo > after) {
      // adapters kept for the record are the rounds at or below the cursor a later sweep must look at again
      const kept = Math.min(upTo, ...[...this.#keptAdapters].map((r) => r - 1));
      await writeFileAtomic(this.#cursorFile(), `${JSON.stringify({ pruned_up_to: kept })}\n`);
      this.#prunedUpTo = upTo;
    }
    if (due.length > 0) this.opts.log.debug({ upTo, pruned: due.length, adaptersKept: [...this.#keptAdapters] }, "retention: old rounds pruned");
  }

  async #readCursor(): Promise<number> {
    try {
      const value = (JSON.parse(await readFile(this.#cursorFile(), "utf8")) as { pruned_up_to?: unknown }).pruned_up_to;
      return typeof value === "number" && Number.isInteger(value) && value >= 0 ? value : 0;
    } catch {
      return 0; // none yet, or unreadable: every round is looked at once (pruned ones cost a directory read)
    }
  }

  #cursorFile(): string {
    return join(policyDir(this.opts.workDir, this.opts.policy), CURSOR_FILE);
  }

  /** Round folders in (after, upTo], by name; only committed ones are touched (recovery owns the others). */
  async #committedFolders(after: number, upTo: number): Promise<number[]> {
    if (upTo <= after) return [];
    const names = await readdir(policyDir(this.opts.workDir, this.opts.policy)).catch(() => [] as string[]);
    return names.filter((n) => ROUND_DIR_NAME.test(n)).map(Number).filter((r) => r > after && r <= upTo).sort((a, b) => a - b);
  }

  async #prune(round: number, keepAdapter: boolean): Promise<void> {
    const dir = roundDir(this.opts.workDir, this.opts.policy, round);
    if ((await readManifest(dir).catch(() => null))?.status !== "committed") return;
    if (keepAdapter) this.#keptAdapters.add(round);
    else {
      // the stored objects first: a folder without its adapter says both are gone
      await this.#deleteStoredAdapter(round);
      this.#keptAdapters.delete(round);
    }
    const entries = await readdir(dir).catch(() => [] as string[]);
    const gone = entries.filter((name) => name !== KEPT_FILE && !(keepAdapter && name === ADAPTER_DIR));
    await Promise.all(gone.map((name) => rm(join(dir, name), { recursive: true, force: true })));
  }

  /** The round's adapter files in rlloop-adapters (its manifest object stays); absent ones are nothing to do. */
  async #deleteStoredAdapter(round: number): Promise<void> {
    const prefix = adapterObjectPrefix(this.opts.policy, round);
    for (const name of CONTINUATION_FILES) {
      const info = await this.opts.adapters.info(`${prefix}/${name}`);
      if (info !== null && !info.deleted) await this.opts.adapters.delete(`${prefix}/${name}`);
    }
  }
}

/** Rounds whose adapter the record names: the one served and continued, and the lineage a rollback can go back to. */
function namedRounds(record: StateRecord): Set<number> {
  return new Set([record.adapter.round, ...record.lineage.map((e) => e.round)]);
}
