// Row order and batches, as torch's DistributedSampler + DataLoader give them in the seed, except for the
// permutation's generator: torch.randperm's stream is not reproducible outside torch, so the order comes from a
// documented generator instead (docs/trainer.md "Row order"), and the Python reference takes it on its command line.
//
//   epoch order  = seededPermutation(rows, seed, epoch)      (shuffle on; in order when off)
//   padded       = order + order[0 : pad] so its length is a multiple of world (DistributedSampler's padding)
//   rank r reads = padded[r], padded[r + world], ...          then batches of `batch` rows, the last one smaller
//
// So one rank with batch 2b and two ranks with batch b see the same rows in each global step.

/** splitmix64 (Steele et al. 2014): a 64-bit state advanced by a Weyl step and finalised with two multiplies. */
export class SplitMix64 {
  private state: bigint;
  constructor(seed: bigint) {
    this.state = BigInt.asUintN(64, seed);
  }
  next(): bigint {
    this.state = BigInt.asUintN(64, this.state + 0x9e3779b97f4a7c15n);
    let z = this.state;
    z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
    z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
    return z ^ (z >> 31n);
  }
  /** Uniform integer in [0, bound): the top 53 bits as a fraction, times bound, floored (bias < 2^-53·bound). */
  below(bound: number): number {
    const fraction = Number(this.next() >> 11n) / 2 ** 53;
    return Math.floor(fraction * bound);
  }
}

/**
 * A permutation of 0..n-1: Fisher–Yates from the top, i = n-1 down to 1 swapping i with j = below(i + 1), on a
 * splitmix64 stream seeded with seed · 2^32 + epoch (the seed trainer's set_epoch: a new order every epoch).
 */
export function seededPermutation(n: number, seed: number, epoch: number): number[] {
  const order = Array.from({ length: n }, (_, i) => i);
  const rng = new SplitMix64((BigInt(seed) << 32n) + BigInt(epoch));
  for (let i = n - 1; i > 0; i--) {
    const j = rng.below(i + 1);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  return order;
}

export interface ShardOptions {
  rows: number;
  seed: number;
  epoch: number;
  rank: number;
  world: number;
  shuffle: boolean;
}

/** The row indices rank `rank` reads in `epoch` (DistributedSampler with drop_last off). */
export function rankOrder({ rows, seed, epoch, rank, world, shuffle }: ShardOptions): number[] {
  const order = shuffle ? seededPermutation(rows, seed, epoch) : Array.from({ length: rows }, (_, i) => i);
  const total = Math.ceil(rows / world) * world;
  const padded = order.concat(repeatPrefix(order, total - rows));
  return padded.filter((_, i) => i % world === rank);
}

function repeatPrefix(order: number[], count: number): number[] {
  const out: number[] = [];
  while (out.length < count) out.push(...order.slice(0, count - out.length));
  return out;
}

/** A rank's batches of row indices in one epoch of a training job: its shuffled order (rankOrder), in batches. */
export function epochGroups(rows: number, job: { seed: number; batch: number }, epoch: number, rank: number, world: number): number[][] {
  return batches(rankOrder({ rows, seed: job.seed, epoch, rank, world, shuffle: true }), job.batch);
}

/** Consecutive batches of `size` (the last one may be smaller), as DataLoader(batch_size=size) gives them. */
export function batches<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** Global step count of one epoch on every rank (each rank reads ceil(rows / world) rows). */
export function batchesPerEpoch(rows: number, world: number, batch: number): number {
  return Math.ceil(Math.ceil(rows / world) / batch);
}

/** Validation rows of a rank: rows[rank::world], no padding (the seed's accuracy()). */
export function strided<T>(items: T[], rank: number, world: number): T[] {
  return items.filter((_, i) => i % world === rank);
}
