// Rollback (issue 23): the state record moves back to an earlier adapter of the lineage — served again by its own
// versioned name, and continued by the next round with its own optimizer state — and an announcement on
// rlloop.<policy>.adapter.rolled_back tells the reloader and the rollout workers. The live-outcome guard does it inside
// a round's commit (round-runner.ts: that round trains again from the target and its adapter is published after the
// rollback's announcement, a child of the target); an
// operator does it between rounds (`rlloop rollback --to-round N` → the service's `rollback` endpoint → daemon.ts).
// Either way it is one compare-and-set of the state record, and the announcement is idempotent like a publish: its
// Nats-Msg-Id is <policy>.rollback.<seq>, and a start whose record names a rollback not yet announced announces it.
// The lineage is explicit: the manifest of the round that continues the target names it as its parent.
import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import type { ObjectStore } from "@nats-io/obj";
import type { Logger } from "pino";
import { join } from "node:path";
import { ADAPTER_BUCKET, AdapterRolledBack, adapterName, EVENT_STREAM, msgIds, subjects, type GuardEvidence, type LineageEntry, type RollbackTrigger } from "../contract/index.js";
import { decodeWithNonFinite, encodeWithNonFinite } from "../contract/index.js";
import { checkAdapterDir } from "../train/job-inputs.js";
import { fetchFolder } from "./continuation.js";
import { ObjectIntegrityError } from "./object-download.js";
import { roundDir } from "./paths.js";
import { withRecentAdapter, type StateRecord } from "./state.js";
import { ADAPTER_FILES } from "./trainer.js";

/** A rollback the daemon cannot do (unknown round, nothing kept to continue it): the request is refused, nothing moves. */
export class RollbackRefusedError extends Error {
  override name = "RollbackRefusedError";
}
export const isRollbackRefused = (err: unknown): err is RollbackRefusedError => err instanceof RollbackRefusedError;

export interface RollbackInfo {
  trigger: RollbackTrigger;
  /** the adapter the guard found worse (null: manual) */
  regressed: number | null;
  reason: string;
  evidence: GuardEvidence | null;
}

/** The lineage's parent links: the record's lineage entries, then its live outcomes. */
export function parentOf(record: Pick<StateRecord, "lineage" | "outcomes">): (round: number) => number | null {
  const parents = new Map<number, number | null>();
  for (const a of record.outcomes.adapters) parents.set(a.round, a.parent);
  for (const e of record.lineage) parents.set(e.round, e.parent);
  return (round) => parents.get(round) ?? null;
}

/** The lineage entries kept: the served adapter's `keep` nearest ancestors (itself included) and the last `keep`
 *  published, so that a rollback (or an operator's roll-forward) has an adapter and optimizer state to continue. */
export function keptLineage(entries: readonly LineageEntry[], current: number, keep: number): LineageEntry[] {
  const byRound = new Map(entries.map((e) => [e.round, e]));
  const kept = new Set(entries.slice(-keep).map((e) => e.round));
  for (let round: number | null = current, n = 0; round !== null && n < keep; n++) {
    const entry = byRound.get(round);
    if (!entry) break;
    kept.add(round);
    round = entry.parent;
  }
  return entries.filter((e) => kept.has(e.round));
}

/** Where the target lives on this disk, fetched from its stored objects when it is not here (a standby's disk). */
export async function targetFolder(store: ObjectStore, record: StateRecord, round: number, workDir: string, log: Logger): Promise<LineageEntry> {
  const entry = record.lineage.find((e) => e.round === round);
  if (!entry) {
    const rounds = record.lineage.map((e) => e.round).join(", ");
    throw new RollbackRefusedError(`round ${round} is not an adapter the loop keeps to go back to (kept: ${rounds || "none"})`);
  }
  if (round === record.adapter.round) throw new RollbackRefusedError(`round ${round}'s adapter is the one served and continued already`);
  const usable = await checkAdapterDir(entry.path, `round ${round}'s adapter`).then(() => true, () => false);
  if (usable) return entry;
  if (!entry.objects) throw new RollbackRefusedError(`round ${round}'s adapter is neither at ${entry.path} nor in the object store`);
  const dir = round === 0 ? join(workDir, "adapters", record.policy, "r0") : join(roundDir(workDir, record.policy, round), "adapter");
  log.info({ round, objects: entry.objects.prefix, dir }, "fetching the rollback target from the object store");
  await fetchFolder(store, entry.objects, dir).catch((cause: unknown) => {
    // stored objects that are gone or differ from the record will not come back by asking again
    if (cause instanceof ObjectIntegrityError) throw new RollbackRefusedError(`round ${round}'s stored adapter cannot be used: ${cause.message}`, { cause });
    throw cause;
  });
  return { ...entry, path: dir };
}

/** The record once rolled back to `target` (same committed round; the next round continues the target); `streamSeq`
 *  the rollout stream's last sequence now. */
export function rolledBack(record: StateRecord, target: LineageEntry, info: RollbackInfo, streamSeq: number): StateRecord {
  const at = new Date().toISOString();
  return {
    ...record,
    adapter: { round: target.round, path: target.path, sha256: target.sha256, ...(target.objects ? { objects: target.objects } : {}) },
    // served again: it moves to the end of the serving order, so the staleness rule (staleness.ts) counts from it
    recent_adapters: withRecentAdapter(record, target.round, target.sha256, streamSeq),
    lineage: [...record.lineage.filter((e) => e.round !== target.round), target],
    rollback: {
      seq: (record.rollback?.seq ?? 0) + 1, trigger: info.trigger, from: record.adapter.round, to: target.round,
      regressed: info.regressed, reason: info.reason, evidence: info.evidence, round: record.round, at,
    },
    at,
  };
}

/** The last rollback announcement's stream sequence and seq (null when none). */
async function lastRollback(jsm: JetStreamManager, policy: string): Promise<{ streamSeq: number; seq: number } | null> {
  const msg = await jsm.streams.getMessage(EVENT_STREAM, { last_by_subj: subjects(policy).adapterRolledBack });
  if (!msg) return null;
  const parsed = AdapterRolledBack.safeParse(decodeWithNonFinite(msg.string()));
  return { streamSeq: msg.seq, seq: parsed.success ? parsed.data.seq : 0 };
}

/** Announces the record's rollback unless the subject already holds it (or a later one). */
export async function announceRollback(nats: { js: JetStreamClient; jsm: JetStreamManager }, record: StateRecord): Promise<{ announced: boolean; event: AdapterRolledBack }> {
  const rb = record.rollback;
  if (!rb) throw new Error("the state record names no rollback to announce");
  const event = rollbackEvent(record);
  const last = await lastRollback(nats.jsm, record.policy);
  if (last && last.seq >= rb.seq) return { announced: false, event };
  try {
    await nats.js.publish(subjects(record.policy).adapterRolledBack, encodeWithNonFinite(event), {
      msgID: msgIds.rollback(record.policy, rb.seq), expect: { lastSubjectSequence: last?.streamSeq ?? 0 },
    });
  } catch (err) {
    const now = await lastRollback(nats.jsm, record.policy);
    if (now && now.seq >= rb.seq) return { announced: false, event };
    throw err;
  }
  return { announced: true, event };
}

/** The announcement of the record's rollback: the target's published files (the object store holds them). */
export function rollbackEvent(record: StateRecord): AdapterRolledBack {
  const rb = record.rollback;
  // the target is the record's adapter, or (the round that rolled back trained again from it) that adapter's parent
  const objects = record.adapter.round === rb?.to ? record.adapter.objects : record.lineage.find((e) => e.round === rb?.to)?.objects;
  if (!rb || !objects) throw new Error(`round ${rb?.to ?? record.adapter.round}: a rollback needs the target's objects in the store`);
  const files = objects.files.filter((f) => (ADAPTER_FILES as readonly string[]).includes(f.name))
    .map((f) => ({ name: f.name, object: `${objects.prefix}/${f.name}`, sha256: f.sha256, size: f.size }));
  return {
    type: "adapter.rolled_back", policy: record.policy, seq: rb.seq, trigger: rb.trigger,
    round: rb.to, name: adapterName(record.policy, rb.to), object: objects.prefix, bucket: ADAPTER_BUCKET,
    sha256: files.find((f) => f.name === "adapter_model.safetensors")?.sha256 ?? "", files,
    from: { round: rb.from, name: adapterName(record.policy, rb.from) }, regressed: rb.regressed, reason: rb.reason,
    evidence: rb.evidence, committed_round: rb.round, at: rb.at,
  };
}
