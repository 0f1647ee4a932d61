// Brings one vLLM replica to a newly published adapter: load it under its versioned name (never in place), check
// that /v1/models lists it with our path, then unload this policy's versions older than the newest `keep`.
// Transient failures are retried with exponential backoff (p-retry); a permanent one ends the attempt with its
// reason. Nothing here throws: the caller gets a result to publish, so one bad replica never stops the others.
import pRetry from "p-retry";
import { isAlreadyLoaded, isTransient, isUnknownAdapter, type ModelCard, type VllmClient } from "./vllm-client.js";

export interface RetryPolicy {
  /** retries after the first attempt */
  retries: number;
  minTimeoutMs: number;
  maxTimeoutMs: number;
}

export interface AdapterTarget {
  policy: string;
  round: number;
  /** `<policy>-r<round>` */
  name: string;
  /** local directory the replica reads */
  path: string;
}

export type SyncResult =
  | { ok: true; replica: string; name: string; alreadyLoaded: boolean; unloaded: string[]; unloadErrors: string[] }
  | { ok: false; replica: string; name: string; reason: string };

/** `served`: the rounds announced to be served, oldest first (a rollback's target again at its end, issue 23). */
export async function syncReplica(client: VllmClient, target: AdapterTarget, keep: number, retry: RetryPolicy, signal?: AbortSignal, served: readonly number[] = []): Promise<SyncResult> {
  const withRetry = <T>(work: () => Promise<T>) =>
    pRetry(work, {
      retries: retry.retries,
      minTimeout: retry.minTimeoutMs,
      maxTimeout: retry.maxTimeoutMs,
      factor: 2,
      randomize: true,
      signal,
      shouldRetry: ({ error }) => isTransient(error),
    });
  try {
    const alreadyLoaded = await withRetry(() => ensureLoaded(client, target));
    const listed = await withRetry(() => client.models());
    const card = listed.find((m) => m.id === target.name);
    if (!card) return failure(client, target, `loaded, but GET /v1/models does not list ${target.name}`);
    if (card.root !== null && card.root !== target.path) {
      return failure(client, target, `${target.name} is served from ${card.root}, not ${target.path}; unload it by hand`);
    }
    const { unloaded, unloadErrors } = await unloadOlder(client, listed, target, keep, served, withRetry);
    return { ok: true, replica: client.replica, name: target.name, alreadyLoaded, unloaded, unloadErrors };
  } catch (err) {
    return failure(client, target, err instanceof Error ? err.message : String(err));
  }
}

/** Loads the adapter; a name vLLM already holds counts as loaded (a restarted reloader, a retried request). */
async function ensureLoaded(client: VllmClient, target: AdapterTarget): Promise<boolean> {
  try {
    await client.load(target.name, target.path);
    return false;
  } catch (err) {
    if (isAlreadyLoaded(err)) return true;
    throw err;
  }
}

/** This policy's versions on the replica, newest first, by the round in `<policy>-r<round>`. */
export function policyVersions(models: ModelCard[], policy: string): Array<{ name: string; round: number }> {
  const pattern = new RegExp(`^${escapeRegExp(policy)}-r(\\d+)$`);
  return models
    .map((m) => ({ name: m.id, match: pattern.exec(m.id) }))
    .filter((m): m is { name: string; match: RegExpExecArray } => m.match !== null)
    .map((m) => ({ name: m.name, round: Number(m.match[1]) }))
    .sort((a, b) => b.round - a.round);
}

/** Versions to unload: all but the `keep` served last (then, for what the history does not cover, the newest by
 *  round), never the target itself. After a rollback the target and the adapter served before it are the last two
 *  served, whatever their round numbers: in-flight rollouts of the rolled-back adapter still find it loaded. */
export function versionsToUnload(models: ModelCard[], target: AdapterTarget, keep: number, served: readonly number[] = []): string[] {
  const versions = policyVersions(models, target.policy);
  const kept = new Set(keptRounds(served, versions.map((v) => v.round), keep));
  return versions.filter((v) => !kept.has(v.round)).map((v) => v.name).filter((name) => name !== target.name);
}

/** The `keep` rounds served last (distinct), filled up with the newest of `present` by round. */
export function keptRounds(served: readonly number[], present: readonly number[], keep: number): number[] {
  const kept: number[] = [];
  for (const round of [...served].reverse()) if (!kept.includes(round) && kept.length < keep) kept.push(round);
  for (const round of [...present].sort((a, b) => b - a)) if (!kept.includes(round) && kept.length < keep) kept.push(round);
  return kept;
}

async function unloadOlder(
  client: VllmClient, listed: ModelCard[], target: AdapterTarget, keep: number, served: readonly number[],
  withRetry: <T>(work: () => Promise<T>) => Promise<T>,
): Promise<{ unloaded: string[]; unloadErrors: string[] }> {
  const unloaded: string[] = [];
  const unloadErrors: string[] = [];
  for (const name of versionsToUnload(listed, target, keep, served)) {
    try {
      await withRetry(() => client.unload(name).catch((err) => {
        if (!isUnknownAdapter(err)) throw err; // already gone: the goal is reached
        return "";
      }));
      unloaded.push(name);
    } catch (err) {
      // the new adapter is serving; an old one left loaded only costs memory, so report it and carry on
      unloadErrors.push(`${name}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return { unloaded, unloadErrors };
}

function failure(client: VllmClient, target: AdapterTarget, reason: string): SyncResult {
  return { ok: false, replica: client.replica, name: target.name, reason };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
