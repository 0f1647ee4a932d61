// The staleness rule (src/loop/staleness.ts) on its own: counted in serving order (rollbacks included), and for an
// adapter older than the state record's window of recent adapters, counted so that offPolicy.maxStaleness still
// means what it says (a fault-injection campaign of 40 cycles with maxStaleness 1000 once lost good rollouts to it).
import { describe, expect, it } from "vitest";
import { RolloutRejectedError } from "../src/loop/errors.js";
import { RECENT_ADAPTERS, withRecentAdapter, type StateRecord } from "../src/loop/state.js";
import { checkAdapter } from "../src/loop/staleness.js";

const SHA = (n: number) => n.toString(16).padStart(64, "0");

/** A record that announced `rounds` in this order (a rollback repeats a round); `unpublished` rounds committed without. */
function served(rounds: number[], unpublished: number[] = []): StateRecord {
  let record = {
    version: 2, policy: "bt", round: 0, outcome: "initial", adapter: { round: 0, path: "/a/0", sha256: SHA(0) },
    reference: { path: "/ref", sha256: null }, last_seq: 0, ack_floor: 0, recent_adapters: [{ round: 0, sha256: SHA(0) }], unpublished,
    outcomes: { range: null, adapters: [] }, lineage: [], rollback: null, at: "2026-12-03T00:00:00.000Z",
  } as StateRecord;
  // the k-th announcement is committed when the rollout stream's last sequence is 100·k
  rounds.forEach((round, k) => {
    record = { ...record, round: Math.max(record.round, round), adapter: { round, path: `/a/${round}`, sha256: SHA(round) }, recent_adapters: withRecentAdapter(record, round, SHA(round), 100 * (k + 1)) };
  });
  return record;
}

/** The verdict on a rollout of adapter `round` at stream sequence `seq` (by default after every announcement). */
const reason = (round: number, state: StateRecord, maxStaleness: number, sha256?: string, seq = Number.MAX_SAFE_INTEGER) => {
  try {
    checkAdapter({ round, name: `bt-r${round}`, ...(sha256 ? { sha256 } : {}) }, state, maxStaleness, seq);
    return "ok";
  } catch (err) {
    if (err instanceof RolloutRejectedError) return err.reason;
    throw err;
  }
};

describe("loop - staleness", () => {
  const rounds = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

  it("counts adapters announced after the rollout's own", () => {
    const state = served(rounds(5));
    expect([0, 1, 2, 3, 4, 5].map((r) => reason(r, state, 2))).toEqual(["stale_adapter", "stale_adapter", "stale_adapter", "ok", "ok", "ok"]);
    expect(reason(6, state, 2)).toBe("unknown_adapter");
    expect(reason(5, state, 0, SHA(4))).toBe("adapter_mismatch");
  });

  it("after a rollback from 7 to 5, 5 is fresh and 7 one behind; a round that never published is unknown", () => {
    const state = served([1, 2, 3, 5, 6, 7, 5], [4, 8]);
    expect(reason(5, state, 0)).toBe("ok");
    expect(reason(7, state, 0)).toBe("stale_adapter");
    expect(reason(7, state, 1)).toBe("ok");
    expect(reason(4, state, 100)).toBe("unknown_adapter");
    expect(reason(8, state, 100)).toBe("unknown_adapter");
  });

  it("long after a rollback, a published round outside the window is old, not unknown", () => {
    // r1-r20 published, rolled back from 20 to 18 (r21 committed without publishing), then r22-r35
    const state = served([...rounds(20), 18, ...Array.from({ length: 14 }, (_, i) => 22 + i)], [21]);
    expect(state.recent_adapters.map((a) => a.round).slice(0, 3)).toEqual([20, 18, 22]);
    expect(reason(19, state, 1000)).toBe("ok");
    expect(reason(17, state, 1000)).toBe("ok");
    expect(reason(19, state, 15)).toBe("stale_adapter");
    expect(reason(21, state, 1000)).toBe("unknown_adapter");
  });

  it("an adapter older than the record's window is admitted while maxStaleness allows it, counted as at most one adapter a round", () => {
    const n = RECENT_ADAPTERS + 24;
    const state = served(rounds(n));
    expect(state.recent_adapters).toHaveLength(RECENT_ADAPTERS);
    // round 0 is n adapters behind: admitted at maxStaleness n, stale below it
    expect(reason(0, state, 1000)).toBe("ok");
    expect(reason(0, state, n)).toBe("ok");
    expect(reason(0, state, n - 1)).toBe("stale_adapter");
    // just outside the window
    const justOut = n - RECENT_ADAPTERS;
    expect(reason(justOut, state, RECENT_ADAPTERS)).toBe("ok");
    expect(reason(justOut, state, RECENT_ADAPTERS - 1)).toBe("stale_adapter");
  });

  it("judges a rollout by the adapters announced before it reached the stream: the same verdict on arrival, after a restart, after any wait", () => {
    // announcements at stream sequences 100 (r1), 200 (r2), 300 (r3); a rollout of r1 that arrived at 250 was one
    // behind then, and stays one behind however many rounds commit before it is judged (again)
    const state = served(rounds(5));
    expect(reason(1, state, 1, undefined, 250)).toBe("ok");
    expect(reason(1, state, 0, undefined, 250)).toBe("stale_adapter");
    expect(reason(1, state, 1, undefined, 301)).toBe("stale_adapter"); // arrived after r3 too: two behind
    expect(reason(2, state, 0, undefined, 250)).toBe("ok");
    // at its announcement's own sequence, a rollout reached the stream before it
    expect(reason(1, state, 1, undefined, 300)).toBe("ok");
    // rolled back to r2 after the rollout arrived: r2 counts where it is now (fresh)
    const back = served([1, 2, 3, 2]);
    expect(reason(2, back, 0, undefined, 250)).toBe("ok");
    expect(reason(3, back, 0, undefined, 350)).toBe("ok");
    expect(reason(3, back, 0, undefined, 450)).toBe("stale_adapter");
  });

  it("a rollout that waited while the whole window was announced after it is judged as on arrival", () => {
    // r1..r17 announced at 100..1700: a rollout of r1 that reached the stream at 150 was fresh, and r1 has left the
    // 16-adapter window since; one of r1 at 350 was two behind (r2, r3)
    const state = served(rounds(RECENT_ADAPTERS + 1));
    expect(state.recent_adapters.every((a) => (a.seq ?? 0) > 150)).toBe(true);
    expect(reason(1, state, 0, undefined, 150)).toBe("ok");
    // nor is one whose staleness on arrival can no longer be told: r1..r20 announced, the window r5..r20 (500 and
    // after); a rollout of r3 at 350 (fresh then, r4 came after it) is not counted behind the r4 that left the window
    const later = served(rounds(20));
    expect(reason(3, later, 0, undefined, 350)).toBe("ok");
    expect(reason(1, state, 1, undefined, 350)).toBe("stale_adapter");
    expect(reason(1, state, 2, undefined, 350)).toBe("ok");
    expect(reason(1, state, 100, undefined, Number.MAX_SAFE_INTEGER)).toBe("ok");
    expect(reason(1, state, 15, undefined, Number.MAX_SAFE_INTEGER)).toBe("stale_adapter");
  });
});
