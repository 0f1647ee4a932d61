// Round triggers and what a closing round takes.
import { describe, expect, it } from "vitest";
import { parseConfig } from "../src/loop/config/index.js";
import { MAX_CARRIES, RoundBuffer, type BufferEntry } from "../src/loop/rounds.js";

const rules = (round: Record<string, unknown>) => parseConfig({ round }).round;
const entry = (seq: number, rows: number, group?: string): BufferEntry => ({ seq, id: `r${seq}`, group, rows });

describe("rounds - triggers", () => {
  it("closes on rows", () => {
    const buffer = new RoundBuffer();
    buffer.add(entry(2, 3), 0);
    expect(buffer.trigger(0, rules({ rows: 5, maxWaitS: null }))).toBeNull();
    buffer.add(entry(1, 2), 0);
    expect(buffer.trigger(0, rules({ rows: 5, maxWaitS: null }))).toBe("rows");
    expect(buffer.take("rows", rules({ rows: 5 }), 0).map((e) => e.seq)).toEqual([1, 2]);
    expect(buffer.rows).toBe(0);
    expect(buffer.openedAt).toBeNull();
  });

  it("closes on max wait only with min rows", () => {
    const buffer = new RoundBuffer();
    const r = rules({ rows: 100, maxWaitS: 10, minRows: 3 });
    buffer.add(entry(1, 2), 1000);
    expect(buffer.trigger(20_000, r)).toBeNull();
    buffer.add(entry(2, 1), 15_000);
    expect(buffer.trigger(10_999, r)).toBeNull();
    expect(buffer.trigger(11_000, r)).toBe("max_wait");
  });

  it("caps min rows at rows", () => {
    const buffer = new RoundBuffer();
    buffer.add(entry(1, 4), 0);
    expect(buffer.trigger(2000, rules({ rows: 4, maxWaitS: 1, minRows: 32 }))).toBe("rows");
  });

  it("closes on complete groups and carries incomplete ones", () => {
    const buffer = new RoundBuffer();
    const r = rules({ rows: 100, groups: 2, groupSize: 2, maxWaitS: null });
    buffer.add(entry(1, 1, "a"), 0);
    buffer.add(entry(2, 1, "b"), 0);
    buffer.add(entry(3, 1, "a"), 0);
    buffer.add(entry(4, 1), 0);
    expect(buffer.trigger(0, r)).toBeNull();
    buffer.add(entry(5, 1, "c"), 0);
    buffer.add(entry(6, 1, "c"), 0);
    expect(buffer.trigger(0, r)).toBe("groups");
    expect(buffer.take("groups", r, 0).map((e) => e.seq)).toEqual([1, 3, 4, 5, 6]);
    expect([...buffer.entries()].map((e) => e.seq)).toEqual([2]);
  });

  it("after a groups close, max wait counts from the oldest rollout left behind, not the closed round's first", () => {
    const buffer = new RoundBuffer();
    const r = rules({ rows: 100, groups: 1, groupSize: 2, maxWaitS: 10, minRows: 1 });
    buffer.add(entry(1, 1, "a"), 0);
    buffer.add(entry(2, 1, "b"), 5_000);
    buffer.add(entry(3, 1, "a"), 9_000);
    expect(buffer.take(buffer.trigger(9_000, r)!, r, 9_000).map((e) => e.seq)).toEqual([1, 3]);
    expect(buffer.openedAt).toBe(5_000);
    expect(buffer.trigger(14_999, r)).toBeNull();
    expect(buffer.trigger(15_000, r)).toBe("max_wait");
  });

  it("an incomplete group still growing waits for its members, whatever the closes around it", () => {
    const buffer = new RoundBuffer();
    const r = rules({ rows: 2, groupSize: 4, maxWaitS: 10 });
    let seq = 100;
    // one robot's episodes one after another: a member every close, each close past round.maxWaitS of the first
    for (let close = 0; close < 3; close++) {
      buffer.add(entry(close + 1, 1, "slow"), close * 8_000);
      for (let k = 0; k < 4; k++) buffer.add(entry(seq++, 1, `g${close}`), close * 8_000);
      expect(buffer.take(buffer.trigger(close * 8_000, r)!, r, close * 8_000).map((e) => e.seq)).not.toContain(1);
    }
    buffer.add(entry(4, 1, "slow"), 24_000);
    expect(buffer.take(buffer.trigger(24_000, r)!, r, 24_000).map((e) => e.seq)).toEqual([1, 2, 3, 4]);
  });

  it("an incomplete group that stalled — no member while MAX_CARRIES closes left it behind, or for round.maxWaitS — trains as it is", () => {
    const buffer = new RoundBuffer();
    const r = rules({ rows: 2, groupSize: 2, maxWaitS: null });
    buffer.add(entry(1, 1, "lost"), 0); // its second member never comes (rejected, or its worker died)
    let seq = 2;
    const closes: number[][] = [];
    for (let close = 0; close <= MAX_CARRIES; close++) {
      buffer.add(entry(seq++, 1, `g${close}`), 0);
      buffer.add(entry(seq++, 1, `g${close}`), 0);
      closes.push(buffer.take(buffer.trigger(0, r)!, r, 0).map((e) => e.seq));
    }
    expect(closes.slice(0, MAX_CARRIES).every((taken) => !taken.includes(1))).toBe(true);
    expect(closes[MAX_CARRIES]).toContain(1);
    expect(buffer.size).toBe(0);

    const timed = new RoundBuffer();
    const t = rules({ rows: 2, groupSize: 2, maxWaitS: 10, minRows: 1 });
    timed.add(entry(1, 1, "lost"), 0);
    timed.add(entry(2, 1, "a"), 5_000);
    timed.add(entry(3, 1, "a"), 5_000);
    expect(timed.take(timed.trigger(5_000, t)!, t, 5_000).map((e) => e.seq)).toEqual([2, 3]);
    timed.add(entry(4, 1, "b"), 10_000);
    timed.add(entry(5, 1, "b"), 10_000);
    expect(timed.take(timed.trigger(10_000, t)!, t, 10_000).map((e) => e.seq)).toEqual([1, 4, 5]);
  });

  it("ignores a second add of the same sequence (a redelivery)", () => {
    const buffer = new RoundBuffer();
    buffer.add(entry(1, 2), 0);
    buffer.add(entry(1, 2), 0);
    expect(buffer.rows).toBe(2);
    expect(buffer.size).toBe(1);
  });
});
