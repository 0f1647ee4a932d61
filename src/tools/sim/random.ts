// Deterministic randomness for the simulator, keyed rather than sequential: every draw is
// sha256(seed, key parts) mapped to [0, 1). A rollout's content therefore depends only on the seed and its own
// coordinates (scenario, member, step, digit), never on how many events were generated before it, so
// `--count`, `--start` and rate limits don't change what a given rollout looks like.
import { createHash } from "node:crypto";

export type KeyPart = string | number;

/** Uniform in [0, 1) from 53 bits of sha256(seed, parts). */
export function uniform(seed: number, ...parts: KeyPart[]): number {
  const digest = createHash("sha256").update(`${seed}\u0000${parts.join("\u0000")}`).digest();
  // 53 bits: the top 21 bits of the first word and all 32 of the second give a double without rounding bias.
  const high = digest.readUInt32BE(0) >>> 11;
  const low = digest.readUInt32BE(4);
  return (high * 2 ** 32 + low) / 2 ** 53;
}

/** Integer in [0, n). */
export function integer(n: number, seed: number, ...parts: KeyPart[]): number {
  return Math.min(n - 1, Math.floor(uniform(seed, ...parts) * n));
}

/** Standard normal by Box-Muller on two keyed uniforms. */
export function normal(seed: number, ...parts: KeyPart[]): number {
  const u1 = Math.max(uniform(seed, ...parts, "bm1"), Number.MIN_VALUE);
  const u2 = uniform(seed, ...parts, "bm2");
  return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
}

export function pick<T>(items: readonly T[], seed: number, ...parts: KeyPart[]): T {
  const item = items[integer(items.length, seed, ...parts)];
  if (item === undefined) throw new RangeError("pick: empty list");
  return item;
}
