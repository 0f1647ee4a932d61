// The health gate (src/loop/gate.ts): non-finite statistics and thresholds.
import { describe, expect, it } from "vitest";
import { parseConfig } from "../src/loop/config/index.js";
import { checkGate } from "../src/loop/gate.js";
import type { PpoStats } from "../src/contract/index.js";

const STATS: PpoStats = { pg_loss: 0.01, kl: 0.02, clip_frac: 0.1, logp_gap: 0.3, logp_gap_abs: 0.4, rows: 256, train_s: 60 };
// the built-in trainer writes mismatch statistics only when asked (a mismatch gate without them is refused at load)
const gate = (g: Record<string, unknown>) => parseConfig({ gate: g, trainer: { mismatchStats: true } }).gate;

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
    ["mismatch", { mismatch: { k1: 0.4, k3: 0.5, ess: 0.9, tis_cap: null, tis_clipped: 0 } }, { maxMismatchKl: 0.1 }, "mismatch.k3 0.5 exceeds gate.maxMismatchKl 0.1"],
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
