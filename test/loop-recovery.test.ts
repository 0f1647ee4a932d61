// What a starting daemon makes of the round folders it finds (src/loop/recovery.ts), judged against the state
// record: the pending round is resumed, partial folders are removed, and a round committed beyond the record (the
// KV state lost writes) stops the start before anything is removed.
import { existsSync } from "node:fs";
import { mkdir, mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { StateConflictError } from "../src/loop/errors.js";
import { writeManifest, type Manifest } from "../src/loop/manifest.js";
import { roundDir } from "../src/loop/paths.js";
import { recover } from "../src/loop/recovery.js";
import type { StateRecord } from "../src/loop/state.js";

const POLICY = "bt";
const log = pino({ level: "silent" });

const state = (round: number): StateRecord => ({
  version: 2, policy: POLICY, round, outcome: "published",
  adapter: { round, path: `/w/${round}/adapter`, sha256: null }, reference: { path: "/w/ref", sha256: null },
  last_seq: round * 4, ack_floor: round * 4, recent_adapters: [], unpublished: [], outcomes: { range: null, adapters: [] }, lineage: [], rollback: null, at: "2026-12-03T00:00:00.000Z",
});

const manifest = (round: number, status: Manifest["status"]): Manifest => ({
  version: 2, round, policy: POLICY, status,
  parent: { round: round - 1, path: `/w/${round - 1}/adapter`, sha256: null }, reference: { path: "/w/ref", sha256: null },
  events: [{ seq: round * 4 + 1, id: `r${round}`, rows: 2 }], poisoned: [], rows: 2, trigger: "rows",
  advantage: { estimator: "grpo", eps: 1e-6, gamma: 1 }, config_hash: "c".repeat(64), train_sha256: "7".repeat(64), seed: round, attempts: 1,
  ...(status === "committed" ? { outcome: "published" as const } : {}),
  created_at: "2026-12-03T00:00:00.000Z", updated_at: "2026-12-03T00:00:00.000Z",
});

async function workDirWith(rounds: Array<[number, Manifest["status"] | null]>): Promise<string> {
  const workDir = await mkdtemp(join(tmpdir(), "rlloop-recovery-"));
  for (const [round, status] of rounds) {
    const dir = roundDir(workDir, POLICY, round);
    await mkdir(dir, { recursive: true });
    if (status) await writeManifest(dir, manifest(round, status));
  }
  return workDir;
}

describe("loop - recovery of round folders", () => {
  it("resumes the next round from its manifest and removes a partial folder beyond it", async () => {
    const workDir = await workDirWith([[1, "committed"], [2, "training"], [3, null]]);
    const recovered = await recover(workDir, state(1), 4, log);
    expect(recovered.pending?.round).toBe(2);
    expect(existsSync(roundDir(workDir, POLICY, 2))).toBe(true);
    expect(existsSync(roundDir(workDir, POLICY, 3))).toBe(false);
    expect(recovered.applied.hasSeq(5)).toBe(true);
  });

  it("refuses to start when a round beyond the state record is committed, and removes nothing", async () => {
    const workDir = await workDirWith([[1, "committed"], [2, "committed"], [3, null]]);
    const refused = await recover(workDir, state(1), 4, log).catch((err: Error) => err);
    expect(refused).toBeInstanceOf(StateConflictError);
    expect((refused as Error).message).toBe(
      `round 2 of policy bt is committed (${roundDir(workDir, POLICY, 2)}) but the state record is at round 1: the KV state ` +
        "lost writes (restored from an older copy, or a bucket re-created?). Restore the state record, or move the round " +
        "folders above it away to redo those rounds",
    );
    expect([2, 3].map((round) => existsSync(roundDir(workDir, POLICY, round)))).toEqual([true, true]);
  });

  it("gives the poison rollouts of the committed rounds, so that a daemon killed before terminating them does not train them again", async () => {
    const workDir = await workDirWith([[1, "committed"], [3, null]]);
    // round 2: committed in the state record, its manifest not yet marked (killed between the commit and the manifest)
    const dir = roundDir(workDir, POLICY, 2);
    await mkdir(dir, { recursive: true });
    await writeManifest(dir, { ...manifest(2, "assembled"), poisoned: [{ seq: 10, id: "bad", rows: 1, error: "trainer exited 1", reason: "poison" }, { seq: 11, id: "worse", rows: 1, error: "x", reason: "logp_mismatch" }] });
    const recovered = await recover(workDir, state(2), 4, log);
    expect(recovered.poisoned).toEqual([10, 11]);
    expect(recovered.applied.hasSeq(9)).toBe(true);
    expect(recovered.applied.hasSeq(10)).toBe(false);
    expect((await recover(workDir, state(2), 0, log)).poisoned).toEqual([]); // outside intake.dedupRounds: not kept
  });
});
