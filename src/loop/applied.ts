// Stream sequences and rollout ids of the last committed rounds. A redelivered message whose sequence is here was
// already applied (its round committed, its ack lost or not yet sent): it is acked, never counted again. An id
// here under another sequence is a duplicate rollout. Bounded to intake.dedupRounds rounds.
export class AppliedRounds {
  readonly #rounds = new Map<number, { seqs: Set<number>; ids: Set<string> }>();

  constructor(private readonly keep: number) {}

  add(round: number, events: ReadonlyArray<{ seq: number; id: string }>): void {
    this.#rounds.set(round, { seqs: new Set(events.map((e) => e.seq)), ids: new Set(events.map((e) => e.id)) });
    const rounds = [...this.#rounds.keys()].sort((a, b) => a - b);
    for (const old of rounds.slice(0, Math.max(0, rounds.length - this.keep))) this.#rounds.delete(old);
  }

  hasSeq(seq: number): boolean {
    for (const r of this.#rounds.values()) if (r.seqs.has(seq)) return true;
    return false;
  }

  /** The sequences round `round` trained, if it is one of the rounds kept. */
  seqsOf(round: number): ReadonlySet<number> | undefined {
    return this.#rounds.get(round)?.seqs;
  }

  hasId(id: string): boolean {
    for (const r of this.#rounds.values()) if (r.ids.has(id)) return true;
    return false;
  }
}

/** Sequences of resolved-by-rejection messages, so a redelivery (term lost) is terminated without re-judging. */
export class RecentSeqs {
  readonly #seqs = new Set<number>();
  constructor(private readonly cap: number) {}

  add(seq: number): void {
    this.#seqs.add(seq);
    if (this.#seqs.size > this.cap) this.#seqs.delete(this.#seqs.values().next().value as number);
  }

  has(seq: number): boolean {
    return this.#seqs.has(seq);
  }
}
