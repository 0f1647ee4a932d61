// The daemon's NATS connection: credentials and TLS from config (never logged), reconnect forever, and the
// JetStream resources it relies on (the two streams) created or brought in line with the config. KV and object
// store buckets are opened by their owners (state.ts, consumed-ids.ts, publish.ts).
import { readFileSync } from "node:fs";
import { jetstream, JetStreamApiCodes, JetStreamApiError, jetstreamManager, type JetStreamClient, type JetStreamManager, type StreamConfig } from "@nats-io/jetstream";
import { credsAuthenticator, nanos, type NatsConnection } from "@nats-io/nats-core";
import { connect, type NodeConnectionOptions } from "@nats-io/transport-node";
import type { Logger } from "pino";
import type { Config } from "./config/index.js";
import { ConfigError } from "./errors.js";
import { EVENT_STREAM, EVENT_STREAM_SUBJECTS, ROLLOUT_STREAM, ROLLOUT_STREAM_SUBJECTS } from "../contract/index.js";

export interface Nats {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
}

export function connectionOptions(nats: Config["nats"], url: string): NodeConnectionOptions {
  const options: NodeConnectionOptions = {
    servers: url.split(",").map((s) => s.trim()).filter(Boolean),
    name: nats.name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    waitOnFirstConnect: true,
    pingInterval: 10_000,
  };
  if (nats.user !== null) options.user = nats.user;
  if (nats.pass !== null) options.pass = nats.pass;
  if (nats.token !== null) options.token = nats.token;
  if (nats.credsFile !== null) options.authenticator = credsAuthenticator(readFileSync(nats.credsFile));
  if (nats.tls !== null) {
    options.tls = {
      ...(nats.tls.ca ? { caFile: nats.tls.ca } : {}),
      ...(nats.tls.cert ? { certFile: nats.tls.cert } : {}),
      ...(nats.tls.key ? { keyFile: nats.tls.key } : {}),
    };
  }
  return options;
}

/**
 * Connects (waiting for the server as long as it takes, as a daemon should); with `timeoutMs` a first connection
 * that does not succeed within it fails instead (the operator commands).
 */
export async function connectNats(nats: Config["nats"], url: string, opts: { timeoutMs?: number } = {}): Promise<Nats> {
  const options = connectionOptions(nats, url);
  if (opts.timeoutMs !== undefined) Object.assign(options, { waitOnFirstConnect: false, timeout: opts.timeoutMs });
  const nc = await connect(options);
  const jsm = await jetstreamManager(nc, { timeout: 10_000 });
  return { nc, js: jetstream(nc, { timeout: 10_000 }), jsm };
}

/** The streams the daemon owns, as the config wants them (limits retention: rounds are replayable from the stream). */
export function streamConfigs(stream: Config["stream"]): Array<Partial<StreamConfig> & { name: string }> {
  return [
    {
      name: ROLLOUT_STREAM,
      subjects: [...ROLLOUT_STREAM_SUBJECTS],
      max_age: nanos(stream.maxAgeS * 1000),
      duplicate_window: nanos(stream.duplicateWindowS * 1000),
      num_replicas: stream.replicas,
    },
    {
      name: EVENT_STREAM,
      subjects: [...EVENT_STREAM_SUBJECTS],
      max_age: nanos(stream.eventsMaxAgeS * 1000),
      duplicate_window: nanos(stream.eventsDuplicateWindowS * 1000),
      num_replicas: stream.replicas,
    },
  ];
}

/**
 * Reconcile, don't just create: a missing stream is created, one whose subjects, age limit, duplicate window or
 * replicas differ from the config is updated (a log line names what changed). A change the server refuses (a
 * subject another stream owns, more replicas than the cluster has) fails the start with the server's reason.
 */
export async function ensureStreams(jsm: JetStreamManager, stream: Config["stream"], log?: Logger): Promise<void> {
  for (const wanted of streamConfigs(stream)) await ensureStream(jsm, wanted, log);
}

const RECONCILED = ["subjects", "max_age", "duplicate_window", "num_replicas"] as const;

async function ensureStream(jsm: JetStreamManager, wanted: Partial<StreamConfig> & { name: string }, log?: Logger): Promise<void> {
  let info;
  try {
    info = await jsm.streams.info(wanted.name);
  } catch (err) {
    if (!isApiError(err, JetStreamApiCodes.StreamNotFound)) throw err;
    await jsm.streams.add(wanted);
    log?.info({ stream: wanted.name }, "stream created");
    return;
  }
  const current = info.config as unknown as Record<string, unknown>;
  const changed = RECONCILED.filter((key) => !sameValue(current[key], (wanted as Record<string, unknown>)[key]));
  if (changed.length === 0) return;
  const changes = Object.fromEntries(changed.map((key) => [key, { from: current[key], to: (wanted as Record<string, unknown>)[key] }]));
  try {
    await jsm.streams.update(wanted.name, Object.fromEntries(changed.map((key) => [key, (wanted as Record<string, unknown>)[key]])));
  } catch (cause) {
    throw new ConfigError(`stream ${wanted.name}: the server refused to change ${changed.join(", ")} (${(cause as Error).message})`, { cause });
  }
  log?.info({ stream: wanted.name, changes }, "stream updated to the config");
}

function sameValue(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && [...a].sort().every((x, i) => x === [...b].sort()[i]);
  return a === b;
}

/** A JetStream API error with this code (checked by code, never by message text). */
export function isApiError(err: unknown, code: number): boolean {
  return err instanceof JetStreamApiError && err.code === code;
}
