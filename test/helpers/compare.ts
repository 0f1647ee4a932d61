// Array comparisons for the conformance suites. A failure names what was compared, the worst element with its
// coordinates and both values, how many elements are over the tolerance, and the scale of the reference, so a
// reader can tell a layout bug (many elements, large diff) from rounding (few, small) without rerunning.
import { expect } from "vitest";

type Numbers = ArrayLike<number>;

export interface AbsDiff {
  maxAbs: number;
  /** coordinates of the worst element in `shape` */
  at: number[];
  actual: number;
  expected: number;
  meanAbs: number;
  /** elements whose difference exceeds the tolerance the report was made for */
  over: number;
  count: number;
  refMaxAbs: number;
}

export function unravel(index: number, shape: number[]): number[] {
  const at: number[] = [];
  for (let d = shape.length - 1; d >= 0; d--) {
    const size = shape[d]!;
    at.unshift(index % size);
    index = Math.floor(index / size);
  }
  return at;
}

export function absDiff(actual: Numbers, expected: Numbers, shape: number[], atol = 0): AbsDiff {
  if (actual.length !== expected.length) {
    throw new Error(`length mismatch: actual ${actual.length} values, expected ${expected.length} (shape [${shape}])`);
  }
  let maxAbs = -1, worst = 0, sum = 0, over = 0, refMaxAbs = 0;
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i]!, e = expected[i]!;
    // NaN or an infinity on either side counts as an infinite difference unless both are the same infinity.
    const d = a === e ? 0 : Number.isFinite(a - e) ? Math.abs(a - e) : Infinity;
    if (d > maxAbs) (maxAbs = d), (worst = i);
    if (d > atol) over++;
    sum += Number.isFinite(d) ? d : 0;
    refMaxAbs = Math.max(refMaxAbs, Math.abs(e));
  }
  return {
    maxAbs: Math.max(maxAbs, 0), at: unravel(worst, shape), actual: actual[worst] ?? NaN, expected: expected[worst] ?? NaN,
    meanAbs: sum / Math.max(expected.length, 1), over, count: expected.length, refMaxAbs,
  };
}

export function describeAbs(label: string, d: AbsDiff, atol: number, shape: number[]): string {
  return `${label} [${shape}]: max |diff| ${d.maxAbs.toExponential(3)} > ${atol} at [${d.at}] ` +
    `(actual ${d.actual}, expected ${d.expected}); ${d.over}/${d.count} elements over, mean |diff| ` +
    `${d.meanAbs.toExponential(3)}, reference max |value| ${d.refMaxAbs.toPrecision(4)}`;
}

/** Asserts max |actual − expected| ≤ atol elementwise. */
export function expectAllClose(label: string, actual: Numbers, expected: Numbers, shape: number[], atol: number): AbsDiff {
  const d = absDiff(actual, expected, shape, atol);
  expect(d.maxAbs, describeAbs(label, d, atol, shape)).toBeLessThanOrEqual(atol);
  return d;
}

export interface RelDiff {
  rel: number;
  diffNorm: number;
  refNorm: number;
}

/** ‖actual − expected‖₂ / ‖expected‖₂ (float64 accumulation). */
export function relativeError(actual: Numbers, expected: Numbers): RelDiff {
  if (actual.length !== expected.length) {
    throw new Error(`length mismatch: actual ${actual.length} values, expected ${expected.length}`);
  }
  let diff = 0, ref = 0;
  for (let i = 0; i < expected.length; i++) {
    const d = actual[i]! - expected[i]!;
    diff += d * d;
    ref += expected[i]! * expected[i]!;
  }
  const diffNorm = Math.sqrt(diff), refNorm = Math.sqrt(ref);
  return { rel: Number.isFinite(diffNorm) ? diffNorm / refNorm : Infinity, diffNorm, refNorm };
}

/** Asserts ‖actual − expected‖ / ‖expected‖ ≤ rtol; the message adds the worst element. */
export function expectRelClose(label: string, actual: Numbers, expected: Numbers, shape: number[], rtol: number): RelDiff {
  const r = relativeError(actual, expected);
  const worst = absDiff(actual, expected, shape);
  const message = `${label} [${shape}]: ‖diff‖/‖ref‖ ${r.rel.toExponential(3)} > ${rtol} (‖diff‖ ` +
    `${r.diffNorm.toExponential(3)}, ‖ref‖ ${r.refNorm.toExponential(3)}); worst element [${worst.at}] actual ` +
    `${worst.actual}, expected ${worst.expected}`;
  expect(r.rel, message).toBeLessThanOrEqual(rtol);
  return r;
}

/** Rows [0, n) of item b of a flat [B, L, ...inner] array. */
export function batchItem<T extends Float32Array | Int32Array>(flat: T, b: number, L: number, inner: number, n = L): T {
  const start = b * L * inner;
  return flat.subarray(start, start + n * inner) as T;
}
