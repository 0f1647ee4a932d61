// The one codec of statistics (src/contract/stats-codec.ts): non-finite values survive a file, an event and IPC.
import { describe, expect, it } from "vitest";
import { decodeStats, decodeWithNonFinite, encodeStats, encodeWithNonFinite, type PpoStats } from "../src/contract/index.js";

const STATS: PpoStats = { pg_loss: Number.NaN, kl: Number.POSITIVE_INFINITY, clip_frac: Number.NEGATIVE_INFINITY, logp_gap: 0.25, logp_gap_abs: 0.5, rows: 8, train_s: 1.5 };

describe("contract - stats codec", () => {
  it("round-trips NaN and ±Infinity (JSON.stringify would write null)", () => {
    const text = encodeStats(STATS);
    expect(text).toContain('"pg_loss":"NaN"');
    expect(JSON.stringify(STATS)).toContain('"pg_loss":null');
    const back = decodeStats(text);
    expect(back.pg_loss).toBeNaN();
    expect(back.kl).toBe(Number.POSITIVE_INFINITY);
    expect(back.clip_frac).toBe(Number.NEGATIVE_INFINITY);
    expect(back.logp_gap).toBe(0.25);
  });

  it("reads Python's bare NaN / Infinity tokens (the seed's stats.json), not inside strings", () => {
    const parsed = decodeWithNonFinite('{"pg_loss": NaN, "kl": Infinity, "clip_frac": -Infinity, "note": "NaN Infinity \\" NaN", "rows": 3}') as Record<string, unknown>;
    expect(parsed.pg_loss).toBeNaN();
    expect(parsed.kl).toBe(Number.POSITIVE_INFINITY);
    expect(parsed.clip_frac).toBe(Number.NEGATIVE_INFINITY);
    expect(parsed.note).toBe('NaN Infinity " NaN');
    expect(parsed.rows).toBe(3);
  });

  it("refuses a stats record that is not one, naming the field", () => {
    expect(() => decodeStats('{"pg_loss": null}')).toThrow(/'pg_loss'/);
    expect(() => decodeStats("not json")).toThrow(SyntaxError);
  });

  it("nested records keep their non-finite numbers", () => {
    const event = { type: "round.trained", stats: { ...STATS, mismatch: { k1: Number.NaN, k3: 1, ess: 1, tis_cap: null, tis_clipped: 0 } } };
    const back = decodeWithNonFinite(encodeWithNonFinite(event)) as typeof event;
    expect(back.stats.mismatch.k1).toBeNaN();
    expect(back.stats.mismatch.tis_cap).toBeNull();
  });
});
