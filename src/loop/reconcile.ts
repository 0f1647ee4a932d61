// Reconcile, don't just create: a JetStream stream the daemon owns (its two streams, and the streams under its KV
// buckets and object store) is brought in line with the config at start — replicas, age limits, history, duplicate
// window, TTL support — with one log line naming each change. A change the server refuses (more replicas than the
// cluster has nodes, replicas on a server without a cluster, a subject another stream owns) ends the start with the
// server's reason as a ConfigError. Errors are told apart by JetStream API codes, never by message text.
import { JetStreamApiCodes, JetStreamApiError, type JetStreamManager, type StreamConfig } from "@nats-io/jetstream";
import type { Logger } from "pino";
import { ConfigError } from "./errors.js";

export type StreamSettings = Partial<StreamConfig>;

/**
 * Updates stream `name` where its config differs from `wanted` (only the keys `wanted` sets are compared);
 * returns the changed keys. `what` names the resource in messages ("stream RLLOOP_ROLLOUTS", "KV bucket rlloop").
 */
export async function reconcileStream(jsm: JetStreamManager, name: string, wanted: StreamSettings, what: string, log?: Logger): Promise<string[]> {
  const current = (await jsm.streams.info(name)).config as unknown as Record<string, unknown>;
  const want = wanted as Record<string, unknown>;
  const changed = Object.keys(want).filter((key) => want[key] !== undefined && !sameValue(current[key], want[key]));
  if (changed.length === 0) return [];
  const changes = Object.fromEntries(changed.map((key) => [key, { from: current[key] ?? null, to: want[key] }]));
  try {
    await jsm.streams.update(name, Object.fromEntries(changed.map((key) => [key, want[key]])));
  } catch (cause) {
    const code = cause instanceof JetStreamApiError ? ` (JetStream error ${cause.code})` : "";
    throw new ConfigError(`${what}: the server refused to change ${describe(changes)}: ${(cause as Error).message}${code}`, { cause });
  }
  log?.info({ resource: what, changes }, `${what} updated to the config: ${describe(changes)}`);
  return changed;
}

/** Creates the stream when missing, else reconciles it. */
export async function ensureStream(jsm: JetStreamManager, wanted: StreamSettings & { name: string }, log?: Logger): Promise<void> {
  try {
    await reconcileStream(jsm, wanted.name, wanted, `stream ${wanted.name}`, log);
  } catch (err) {
    if (!isApiError(err, JetStreamApiCodes.StreamNotFound)) throw err;
    try {
      await jsm.streams.add(wanted);
    } catch (cause) {
      if (!(cause instanceof JetStreamApiError)) throw cause;
      throw new ConfigError(`stream ${wanted.name}: the server refused to create it: ${cause.message} (JetStream error ${cause.code})`, { cause });
    }
    log?.info({ stream: wanted.name }, "stream created");
  }
}

/** A JetStream API error with this code (checked by code, never by message text). */
export function isApiError(err: unknown, code: number): boolean {
  return err instanceof JetStreamApiError && err.code === code;
}

/** `num_replicas 1 → 3, max_age 60s → 120s`: durations (nanoseconds) in seconds. */
function describe(changes: Record<string, { from: unknown; to: unknown }>): string {
  const show = (key: string, v: unknown) => (/max_age|duplicate_window|_ttl$/.test(key) && typeof v === "number" ? `${v / 1e9}s` : JSON.stringify(v));
  return Object.entries(changes).map(([key, { from, to }]) => `${key} ${show(key, from)} → ${show(key, to)}`).join(", ");
}

function sameValue(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && [...a].sort().every((x, i) => x === [...b].sort()[i]);
  // a flag the server leaves out when false (allow_msg_ttl on an older stream) equals false
  if (b === false && (a === undefined || a === null)) return true;
  return a === b;
}
