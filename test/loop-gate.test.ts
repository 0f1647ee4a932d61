// The health gate and the trainer's stats.json parsing (NaN/Infinity as Python writes them).
import { describe, expect, it } from "vitest";
import { parseConfig } from "../src/loop/config.js";
import { checkGate } from "../src/loop/gate.js";
import type { PpoStats } from "../src/loop/schema.js";
import { parseStatsJson } from "../src/loop/trainer.js";

const STATS: PpoStats = { pg_loss: 0.01, kl: 0.02, clip_frac: 0.1, logp_gap: 0.3, logp_gap_abs: 0.4, rows: 256, train_s: 60 };
const gate = (g: Record<string, unknown>) => parseConfig({ gate: g }).gate;

describe("gate", () => {
  it("passes finite stats when every threshold is off", () => {
    expect(checkGate(STATS, gate({}))).toEqual({ ok: true });
  });

  const cases: Array<[string, Partial<PpoStats>, Record<string, unknown>, string]> = [
    ["NaN loss", { pg_loss: Number.NaN }, {}, "pg_loss is not finite (NaN)"],
    ["infinite kl", { kl: Number.POSITIVE_INFINITY }, {}, "kl is not finite (Infinity)"],
    ["logp gap", {}, { maxLogpGapAbs: 0.3 }, "logp_gap_abs 0.4 exceeds gate.maxLogpGapAbs 0.3"],
    ["kl", {}, { maxKl: 0.01 }, "kl 0.02 exceeds gate.maxKl 0.01"],
    ["clip", {}, { maxClipFrac: 0.05 }, "clip_frac 0.1 exceeds gate.maxClipFrac 0.05"],
    ["mismatch missing", {}, { maxMismatchKl: 0.1 }, "gate.maxMismatchKl is set but stats.json has no mismatch.k3"],
    ["mismatch", { mismatch: { k3: 0.5 } }, { maxMismatchKl: 0.1 }, "mismatch.k3 0.5 exceeds gate.maxMismatchKl 0.1"],
  ];
  for (const [name, patch, thresholds, reason] of cases) {
    it(`gate - rejects ${name}`, () => {
      expect(checkGate({ ...STATS, ...patch }, gate(thresholds))).toEqual({ ok: false, reason: expect.stringContaining(reason) as string });
    });
  }

  it("passes at exactly the threshold", () => {
    expect(checkGate(STATS, gate({ maxKl: 0.02, maxClipFrac: 0.1, maxLogpGapAbs: 0.4 }))).toEqual({ ok: true });
  });
});

describe("trainer - stats.json", () => {
  it("reads Python's bare NaN and Infinity", () => {
    const parsed = parseStatsJson('{"pg_loss": NaN, "kl": Infinity, "clip_frac": -Infinity, "rows": 3}') as Record<string, number>;
    expect(parsed.pg_loss).toBeNaN();
    expect(parsed.kl).toBe(Number.POSITIVE_INFINITY);
    expect(parsed.clip_frac).toBe(Number.NEGATIVE_INFINITY);
    expect(parsed.rows).toBe(3);
  });
});
