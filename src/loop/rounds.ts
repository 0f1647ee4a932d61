// The open round's buffer and its trigger (DESIGN.md data flow step 2). A round closes when it has round.rows
// decision rows, or round.groups complete groups (a group is complete with round.groupSize rollouts), or
// round.maxWaitS passed since its oldest rollout arrived with at least min(round.minRows, round.rows) rows.
// When groups are sized, a round closed by rows or groups takes complete groups and ungrouped rollouts and leaves
// incomplete groups for the next round (GRPO needs whole groups); a max-wait close takes everything.
import type { Config } from "./config/index.js";
import type { RoundTrigger } from "../contract/index.js";

export interface BufferEntry {
  /** stream sequence in RLLOOP_ROLLOUTS */
  seq: number;
  id: string;
  group: string | undefined;
  /** decision rows = steps */
  rows: number;
}

export type RoundRules = Config["round"];

/** Closes that may leave an incomplete group behind with no new member; at the next it trains as it is (#groupsToTake). */
export const MAX_CARRIES = 3;

export class RoundBuffer<E extends BufferEntry = BufferEntry> {
  readonly #entries = new Map<number, E>();
  /** stream sequence → ms timestamp of its arrival, in arrival order (a Map keeps insertion order) */
  readonly #arrivedAt = new Map<number, number>();
  /** stream sequence → how many closes left it behind (an incomplete group's) */
  readonly #carried = new Map<number, number>();
  #rows = 0;

  get rows(): number { return this.#rows; }
  get size(): number { return this.#entries.size; }
  /** ms timestamp of the arrival of the open round's oldest rollout (incomplete groups a close left included), null when empty */
  get openedAt(): number | null { return this.#arrivedAt.values().next().value ?? null; }

  has(seq: number): boolean { return this.#entries.has(seq); }
  get(seq: number): E | undefined { return this.#entries.get(seq); }
  entries(): IterableIterator<E> { return this.#entries.values(); }
  /** The stream sequence of the entry with this rollout id, if any. */
  seqOf(id: string): number | undefined {
    for (const e of this.#entries.values()) if (e.id === id) return e.seq;
    return undefined;
  }

  add(entry: E, now: number): void {
    if (this.#entries.has(entry.seq)) return;
    this.#entries.set(entry.seq, entry);
    this.#arrivedAt.set(entry.seq, now);
    this.#rows += entry.rows;
  }

  /** The trigger that closes the round now, or null. */
  trigger(now: number, rules: RoundRules): RoundTrigger | null {
    if (this.#entries.size === 0) return null;
    if (this.#rows >= rules.rows) return "rows";
    if (rules.groups !== null && rules.groupSize !== null && this.completeGroups(rules.groupSize).size >= rules.groups) return "groups";
    const openedAt = this.openedAt;
    const waited = openedAt === null ? 0 : (now - openedAt) / 1000;
    if (rules.maxWaitS !== null && waited >= rules.maxWaitS && this.#rows >= Math.min(rules.minRows, rules.rows)) return "max_wait";
    return null;
  }

  /** Remove and return the entries of the closing round, sorted by stream sequence; `now` in ms. */
  take(trigger: RoundTrigger, rules: RoundRules, now: number): E[] {
    const all = [...this.#entries.values()];
    let chosen = all;
    if (trigger !== "max_wait" && rules.groupSize !== null) {
      const taken = this.#groupsToTake(rules.groupSize, rules.maxWaitS, now);
      const picked = all.filter((e) => e.group === undefined || taken.has(e.group));
      if (picked.length > 0) chosen = picked;
    }
    // what a groups/rows close leaves behind has waited since its own arrival, not since the closed round's first
    for (const e of chosen) this.#remove(e);
    for (const seq of this.#entries.keys()) this.#carried.set(seq, (this.#carried.get(seq) ?? 0) + 1);
    return chosen.sort((a, b) => a.seq - b.seq);
  }

  /**
   * The groups a rows or groups close takes: the complete ones, and an incomplete one that stalled — no member came
   * for round.maxWaitS, or while MAX_CARRIES closes left it behind — which then trains as it is. A group whose missing
   * member was rejected or lost never completes, and under steady load a rows close always comes before round.maxWaitS
   * would: carried for ever, such groups would fill the round and then hold the stream. A group still growing (one
   * robot's episodes one after another) waits for its members.
   */
  #groupsToTake(groupSize: number, maxWaitS: number | null, now: number): Set<string> {
    const members = new Map<string, E[]>();
    for (const e of this.#entries.values()) {
      if (e.group === undefined) continue;
      const list = members.get(e.group);
      if (list) list.push(e);
      else members.set(e.group, [e]);
    }
    const stalled = (e: E) => (this.#carried.get(e.seq) ?? 0) >= MAX_CARRIES || (maxWaitS !== null && now - (this.#arrivedAt.get(e.seq) ?? now) >= maxWaitS * 1000);
    return new Set([...members].filter(([, es]) => es.length >= groupSize || es.every(stalled)).map(([group]) => group));
  }

  /** Groups of `entries` with fewer than `groupSize` of their members there (a stalled group trained as it is). */
  static incompleteGroups(entries: readonly BufferEntry[], groupSize: number): string[] {
    return [...groupCounts(entries)].filter(([, n]) => n < groupSize).map(([group]) => group);
  }

  #remove(e: E) {
    this.#entries.delete(e.seq);
    this.#arrivedAt.delete(e.seq);
    this.#carried.delete(e.seq);
    this.#rows -= e.rows;
  }

  private completeGroups(groupSize: number): Set<string> {
    return new Set([...groupCounts(this.#entries.values())].filter(([, n]) => n >= groupSize).map(([g]) => g));
  }
}

/** Members of each group among `entries`. */
function groupCounts(entries: Iterable<BufferEntry>): Map<string, number> {
  const counts = new Map<string, number>();
  for (const e of entries) if (e.group !== undefined) counts.set(e.group, (counts.get(e.group) ?? 0) + 1);
  return counts;
}
