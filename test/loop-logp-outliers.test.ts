// Which rollouts a round that failed a log-prob gate singles out (src/loop/logp-outliers.ts), from gaps files as the
// trainer writes them: far from the round's median and farther from the trainer than it, fewer than half of the round.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeWithNonFinite, LOGP_GAPS_FILE, type Manifest } from "../src/contract/index.js";
import { logpOutliers } from "../src/loop/logp-outliers.js";

describe("loop - rollouts far from their round's log-prob gaps", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "rlloop-outliers-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** A round of rollouts with these steps each, and the trainer's gaps per row written (or `raw` as the file). */
  async function check(steps: number[], gaps: number[] | null, limit: number | null = 1, raw?: string) {
    const events = steps.map((rows, i) => ({ seq: 10 + i, id: `r${i}`, rows }));
    const manifest = { events, rows: steps.reduce((a, b) => a + b, 0) } as unknown as Manifest;
    await rm(join(dir, LOGP_GAPS_FILE), { force: true });
    if (raw !== undefined) await writeFile(join(dir, LOGP_GAPS_FILE), raw);
    else if (gaps !== null) await writeFile(join(dir, LOGP_GAPS_FILE), encodeWithNonFinite({ gaps }));
    return logpOutliers(manifest, dir, limit);
  }
  const ids = (r: Awaited<ReturnType<typeof check>>) => (r.kind === "outliers" ? r.culprits.map((c) => c.id) : r.kind);

  it("singles out a rollout whose mean gap is far from the round's, by rows in the manifest's order", async () => {
    // r1 has two steps: one wrong by 9, one fine: its mean |gap| 4.5, 4.35 above the median 0.15
    expect(ids(await check([1, 2, 1, 1], [0.1, 9, 0, 0.1, 0.2]))).toEqual(["r1"]);
    const r = await check([1, 2, 1, 1], [0.1, 9, 0, 0.1, 0.2]);
    expect(r.kind === "outliers" && r.culprits[0]).toMatchObject({ seq: 11, rows: 2, reason: "logp_mismatch" });
    expect(ids(await check([1, 2, 1, 1], [0.1, 2, 0, 0.1, 0.2]))).toBe("none"); // mean 1, 0.85 above the median
    expect(ids(await check([1, 1, 1, 1, 1], [-50, 0, 0.1, -0.1, 0]))).toEqual(["r0"]); // either sign
    expect(ids(await check([2, 1, 1, 1], [30, -30, 0, 0.1, 0]))).toEqual(["r0"]); // steps wrong both ways do not cancel

  });

  it("singles no one out where half are far and the other half disagrees with the trainer too, nor the few that agree with the trainer where most do not", async () => {
    expect(ids(await check([1, 1, 1, 1], [9, 9, 3, 3]))).toBe("none");
    expect(ids(await check([1, 1], [12, 50]))).toBe("none");
    // most of the round is shifted by 9: the median is 9, the one at 0 agrees with the trainer
    expect(ids(await check([1, 1, 1, 1, 1], [9, 9.1, 8.9, 9, 0]))).toBe("none");
    // shifted as a whole, one farther still is singled out
    expect(ids(await check([1, 1, 1, 1, 1], [9, 9.1, 8.9, 9, 30]))).toEqual(["r4"]);
  });

  it("singles out the far half of a round whose other half agrees with the trainer: one of two rollouts wrong", async () => {
    expect(ids(await check([1, 1], [0.05, 50]))).toEqual(["r1"]);
    expect(ids(await check([1, 1], [50, 0.05]))).toEqual(["r0"]);
    expect(ids(await check([1, 1, 1, 1], [9, 9, 0, 0.5]))).toEqual(["r0", "r1"]);
    expect(ids(await check([1, 1, 1, 1], [9, 9, 0, 1.5]))).toBe("none"); // 1.5 is beyond the limit: the trainer's word is not met
  });

  it("checks nothing when off, or when the trainer's gaps are missing, of another length, not finite, or not a record", async () => {
    expect(await check([1, 1, 1], [0, 0, 30], null)).toEqual({ kind: "none" });
    expect(await check([1, 1, 1], null)).toEqual({ kind: "unchecked", why: `the trainer wrote no ${LOGP_GAPS_FILE}` });
    expect(await check([1, 1, 1], [0, 30])).toMatchObject({ kind: "unchecked", why: expect.stringContaining("has 2 rows, the round 3") });
    expect(await check([1, 1, 1], [0, Number.NaN, 30])).toMatchObject({ kind: "unchecked", why: expect.stringContaining("not finite") });
    expect(await check([1, 1, 1], null, 1, "[1,2,3]")).toMatchObject({ kind: "unchecked", why: expect.stringContaining("not a gaps record") });
    expect(await check([1, 1, 1], null, 1, "{")).toMatchObject({ kind: "unchecked", why: expect.stringContaining("not JSON") });
  });
});
