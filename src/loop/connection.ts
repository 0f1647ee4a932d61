// The daemon's NATS connection: credentials and TLS from config (never logged), reconnect forever, and the
// JetStream resources it relies on (the two streams) created when missing. KV and object store buckets are
// opened by their owners (state.ts, publish.ts).
import { readFileSync } from "node:fs";
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager, type StreamConfig } from "@nats-io/jetstream";
import { credsAuthenticator, nanos, type NatsConnection } from "@nats-io/nats-core";
import { connect, type NodeConnectionOptions } from "@nats-io/transport-node";
import type { Config } from "./config.js";
import { EVENT_STREAM, EVENT_STREAM_SUBJECTS, ROLLOUT_STREAM, ROLLOUT_STREAM_SUBJECTS } from "./schema.js";

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

export async function connectNats(nats: Config["nats"], url: string): Promise<Nats> {
  const nc = await connect(connectionOptions(nats, url));
  const jsm = await jetstreamManager(nc, { timeout: 10_000 });
  return { nc, js: jetstream(nc, { timeout: 10_000 }), jsm };
}

/** Create the rollout and event streams when missing (limits retention: rounds are replayable from the stream). */
export async function ensureStreams(jsm: JetStreamManager, stream: Config["stream"]): Promise<void> {
  await ensureStream(jsm, {
    name: ROLLOUT_STREAM,
    subjects: [...ROLLOUT_STREAM_SUBJECTS],
    max_age: nanos(stream.maxAgeS * 1000),
    duplicate_window: nanos(stream.duplicateWindowS * 1000),
    num_replicas: stream.replicas,
  });
  await ensureStream(jsm, {
    name: EVENT_STREAM,
    subjects: [...EVENT_STREAM_SUBJECTS],
    max_age: nanos(stream.eventsMaxAgeS * 1000),
    duplicate_window: nanos(stream.eventsDuplicateWindowS * 1000),
    num_replicas: stream.replicas,
  });
}

async function ensureStream(jsm: JetStreamManager, config: Partial<StreamConfig> & { name: string }): Promise<void> {
  try {
    await jsm.streams.info(config.name);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    await jsm.streams.add(config);
  }
}

export function isNotFound(err: unknown): boolean {
  const text = String((err as Error)?.message ?? err);
  return /not found/i.test(text);
}
