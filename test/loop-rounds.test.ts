// Round triggers and what a closing round takes.
import { describe, expect, it } from "vitest";
import { parseConfig } from "../src/loop/config/index.js";
import { RoundBuffer, type BufferEntry } from "../src/loop/rounds.js";

const rules = (round: Record<string, unknown>) => parseConfig({ round }).round;
const entry = (seq: number, rows: number, group?: string): BufferEntry => ({ seq, id: `r${seq}`, group, rows });

describe("rounds - triggers", () => {
  it("closes on rows", () => {
    const buffer = new RoundBuffer();
    buffer.add(entry(2, 3), 0);
    expect(buffer.trigger(0, rules({ rows: 5, maxWaitS: null }))).toBeNull();
    buffer.add(entry(1, 2), 0);
    expect(buffer.trigger(0, rules({ rows: 5, maxWaitS: null }))).toBe("rows");
    expect(buffer.take("rows", rules({ rows: 5 })).map((e) => e.seq)).toEqual([1, 2]);
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
    expect(buffer.take("groups", r).map((e) => e.seq)).toEqual([1, 3, 4, 5, 6]);
    expect([...buffer.entries()].map((e) => e.seq)).toEqual([2]);
  });

  it("after a groups close, max wait counts from the oldest rollout left behind, not the closed round's first", () => {
    const buffer = new RoundBuffer();
    const r = rules({ rows: 100, groups: 1, groupSize: 2, maxWaitS: 10, minRows: 1 });
    buffer.add(entry(1, 1, "a"), 0);
    buffer.add(entry(2, 1, "b"), 5_000);
    buffer.add(entry(3, 1, "a"), 9_000);
    expect(buffer.take(buffer.trigger(9_000, r)!, r).map((e) => e.seq)).toEqual([1, 3]);
    expect(buffer.openedAt).toBe(5_000);
    expect(buffer.trigger(14_999, r)).toBeNull();
    expect(buffer.trigger(15_000, r)).toBe("max_wait");
  });

  it("ignores a second add of the same sequence (a redelivery)", () => {
    const buffer = new RoundBuffer();
    buffer.add(entry(1, 2), 0);
    buffer.add(entry(1, 2), 0);
    expect(buffer.rows).toBe(2);
    expect(buffer.size).toBe(1);
  });
});
