// What a starting daemon finds on disk, judged against the committed state record (the single source of truth):
//   - round folders beyond state.round + 1, and folders of round state.round + 1 without a manifest, are partial
//     work of a killed daemon: removed (their messages are redelivered and buffered again);
//   - a committed manifest beyond state.round cannot come from a killed daemon (the record moves before the
//     manifest is marked): the state record lost writes, and the daemon refuses to start rather than delete it;
//   - a manifest of round state.round + 1 is the pending round: re-run from its manifest, its events reserved;
//   - a manifest of round state.round that is not marked committed (killed between commit and manifest update)
//     is marked committed with the state's outcome;
//   - the last intake.dedupRounds committed manifests give the applied sequences and ids, and the sequences their
//     poison isolation rejected (a daemon killed between the commit and their termination finds them
//     redelivered: rejected already, not judged and trained again);
//   - incoming/ (frames of rollouts not yet in a round) is emptied.
import { readdir, rm } from "node:fs/promises";
import type { Logger } from "pino";
import { AppliedRounds } from "./applied.js";
import { StateConflictError } from "./errors.js";
import { readManifest, updated, writeManifest, type Manifest } from "./manifest.js";
import { incomingDir, policyDir, roundDir, ROUND_DIR_NAME } from "./paths.js";
import type { StateRecord } from "./state.js";

export interface Recovered {
  pending: Manifest | null;
  applied: AppliedRounds;
  /** stream sequences of those rounds' poison rollouts: terminated when redelivered */
  poisoned: number[];
}

export async function recover(workDir: string, state: StateRecord, dedupRounds: number, log: Logger): Promise<Recovered> {
  const policy = state.policy;
  await rm(incomingDir(workDir, policy), { recursive: true, force: true });
  const pending = await recoverPending(workDir, state, log);
  await markCommitted(workDir, state, log);
  const applied = new AppliedRounds(dedupRounds);
  const poisoned: number[] = [];
  for (let round = Math.max(1, state.round - dedupRounds + 1); round <= state.round; round++) {
    const manifest = await readManifest(roundDir(workDir, policy, round)).catch(() => null);
    if (!manifest) continue;
    applied.add(round, manifest.events);
    poisoned.push(...manifest.poisoned.map((p) => p.seq));
  }
  return { pending, applied, poisoned };
}

async function recoverPending(workDir: string, state: StateRecord, log: Logger): Promise<Manifest | null> {
  const next = state.round + 1;
  const later = (await roundNumbers(workDir, state.policy)).filter((round) => round > state.round);
  const manifests = await Promise.all(later.map((round) => readManifest(roundDir(workDir, state.policy, round)).catch(() => null)));
  // judged before anything is removed
  later.forEach((round, i) => {
    if (manifests[i]?.status === "committed") throw committedBeyondState(roundDir(workDir, state.policy, round), round, state);
  });
  let pending: Manifest | null = null;
  for (const [i, round] of later.entries()) {
    const dir = roundDir(workDir, state.policy, round);
    const manifest = manifests[i];
    if (round === next && manifest) {
      pending = manifest;
      log.info({ round, status: manifest.status, attempts: manifest.attempts, events: manifest.events.length }, "resuming the uncommitted round from its manifest");
      continue;
    }
    log.info({ round }, "removing partial round folder of a previous run");
    await rm(dir, { recursive: true, force: true });
  }
  return pending;
}

function committedBeyondState(dir: string, round: number, state: StateRecord): StateConflictError {
  return new StateConflictError(
    `round ${round} of policy ${state.policy} is committed (${dir}) but the state record is at round ${state.round}: ` +
      "the KV state lost writes (restored from an older copy, or a bucket re-created?). Restore the state record, " +
      "or move the round folders above it away to redo those rounds",
  );
}

async function markCommitted(workDir: string, state: StateRecord, log: Logger): Promise<void> {
  if (state.round === 0 || state.outcome === "initial") return;
  const dir = roundDir(workDir, state.policy, state.round);
  const manifest = await readManifest(dir).catch(() => null);
  if (!manifest || manifest.status === "committed") return;
  log.info({ round: state.round, outcome: state.outcome }, "marking the committed round's manifest");
  await writeManifest(dir, updated(manifest, { status: "committed", outcome: state.outcome }));
}

export async function roundNumbers(workDir: string, policy: string): Promise<number[]> {
  let names: string[];
  try {
    names = await readdir(policyDir(workDir, policy));
  } catch {
    return [];
  }
  return names.filter((n) => ROUND_DIR_NAME.test(n)).map(Number).sort((a, b) => a - b);
}

