// The fused delta-rule kernels (native/src/delta_rule/programs.h) run by the CPU executor — the same block
// programs the CUDA build launches — against a float64 run of the ATen formulation, output and every input's
// gradient, at the head sizes the CPU build has and lengths of one to eight chunks, padded or not
// (deltaRuleCheck, delta_rule/check.h). The GPU build's own comparison is bench/gpu/delta_rule_check.sh.
import { describe, expect, it } from "vitest";
import { deltaRuleCheck } from "../src/native.js";
import { figure } from "./helpers/train-run.js";

// float32 arithmetic against float64: the ATen formulation itself lands at 3-8e-7 on these inputs
const TOLERANCE = 5e-6;

describe("native - fused delta-rule kernels (CPU executor)", () => {
  it.each([
    { dim: 16, length: 150, sequences: 3 },
    { dim: 32, length: 200, sequences: 2 },
    { dim: 64, length: 64, sequences: 2 },
    { dim: 128, length: 130, sequences: 2 },
    { dim: 128, length: 500, sequences: 1 },
  ])("head size $dim, $length tokens: output and gradients within float32 rounding of float64", ({ dim, length, sequences }) => {
    const r = deltaRuleCheck({ dim, length, sequences, seed: dim + length });
    const errors = { output: r.kernels.output, ...r.kernels.grads };
    for (const [name, error] of Object.entries(errors)) {
      expect(error, name).toBeGreaterThanOrEqual(0); // a NaN (an unwritten or uninitialised value) fails here
      expect(error, name).toBeLessThanOrEqual(TOLERANCE);
    }
    expect(r.kernelsApply).toBe(false); // on the CPU the model keeps the ATen formulation unless asked
    // a NaN in q, k, v or dO reaches its sequence's results, and only its own (the TF32 rounding's share of this is
    // checked on the GPU: bench/gpu/delta_rule_check.sh; the CPU executor's products are exact float32)
    expect(r.nanLost).toEqual([]);
    figure(`delta-rule kernels, D ${dim}, L ${length}: worst relative L2 vs float64`, Math.max(...Object.values(errors)), TOLERANCE);
  });

  // one token, a chunk's last, the next chunk's first
  it.each([1, 63, 65])("%i tokens: a NaN planted in the last real one reaches its sequence's results", (length) => {
    // the check adds a second sequence of its own: one asked for is enough
    expect(deltaRuleCheck({ dim: 16, length, sequences: 1, seed: length }).nanLost).toEqual([]);
  });

  it("refuses a head size it has no kernels for, naming it", () => {
    expect(() => deltaRuleCheck({ dim: 24 })).toThrow(/do not take dim 24/);
  });
});
