// The loop's NATS connection: servers and credentials from the config (nats-auth.ts; never logged), TLS, reconnect
// forever once connected, and the JetStream resources it relies on (the two streams) created or brought in line
// with the config (reconcile.ts). KV and object store buckets are opened by buckets.ts.
// The first connection waits as long as the server is not there yet (a daemon starts before its NATS), but a
// failure that would repeat forever — refused credentials, an untrusted certificate — ends it with the reason
// (connect-failure.ts).
import { setTimeout as sleep } from "node:timers/promises";
import { accessSync, constants } from "node:fs";
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager, type StreamConfig } from "@nats-io/jetstream";
import { nanos, type NatsConnection } from "@nats-io/nats-core";
import { connect, type NodeConnectionOptions } from "@nats-io/transport-node";
import type { Logger } from "pino";
import { redactUrl, type Config } from "./config/index.js";
import { permanentFailure } from "./connect-failure.js";
import { ConfigError, StopRequestedError } from "./errors.js";
import { natsAuth } from "./nats-auth.js";
import { ensureStream } from "./reconcile.js";
import { EVENT_STREAM, EVENT_STREAM_SUBJECTS, ROLLOUT_STREAM, ROLLOUT_STREAM_SUBJECTS } from "../contract/index.js";

export { isApiError } from "./reconcile.js";

export interface Nats {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
}

/** How long one first-connection attempt may take, and the longest wait between attempts. */
const ATTEMPT_TIMEOUT_MS = 5000;
const MAX_WAIT_MS = 5000;

export function connectionOptions(nats: Config["nats"], url: string): NodeConnectionOptions & { method: string } {
  const auth = natsAuth(nats, url);
  const options: NodeConnectionOptions & { method: string } = {
    servers: auth.servers,
    name: nats.name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    pingInterval: 10_000,
    method: auth.method,
  };
  if (auth.user !== undefined) options.user = auth.user;
  if (auth.pass !== undefined) options.pass = auth.pass;
  if (auth.token !== undefined) options.token = auth.token;
  if (auth.authenticator !== undefined) options.authenticator = auth.authenticator;
  if (nats.tls !== null) {
    for (const field of ["ca", "cert", "key"] as const) {
      const file = nats.tls[field];
      if (file === null) continue;
      try {
        accessSync(file, constants.R_OK);
      } catch (cause) {
        throw new ConfigError(`'nats.tls.${field}' ${file} cannot be read: ${(cause as NodeJS.ErrnoException).code ?? (cause as Error).message}`, { cause });
      }
    }
    if ((nats.tls.cert === null) !== (nats.tls.key === null)) throw new ConfigError("'nats.tls.cert' and 'nats.tls.key' go together (a client certificate and its key)");
    options.tls = {
      ...(nats.tls.ca ? { caFile: nats.tls.ca } : {}),
      ...(nats.tls.cert ? { certFile: nats.tls.cert } : {}),
      ...(nats.tls.key ? { keyFile: nats.tls.key } : {}),
    };
  }
  return options;
}

export interface ConnectOptions {
  /** the first connection must succeed within this long, or fail (the operator commands); default: wait for it */
  timeoutMs?: number;
  /** where the wait for a server that is not up yet is logged */
  log?: Logger;
  /** ends that wait (the daemon stopped while starting): StopRequestedError */
  signal?: AbortSignal;
}

/**
 * Connects. Without `timeoutMs`, a server that is not reachable yet is waited for as long as it takes (as a daemon
 * should); a refusal that cannot change by waiting is a ConfigError with the reason in one line.
 */
export async function connectNats(nats: Config["nats"], url: string, opts: ConnectOptions = {}): Promise<Nats> {
  const { method, ...options } = connectionOptions(nats, url);
  const failed = { shownUrl: redactUrl(url), server: options.servers?.[0] as string, method, tls: nats.tls };
  let waitMs = 500;
  for (let attempt = 1; ; attempt++) {
    try {
      const nc = await connect({ ...options, waitOnFirstConnect: false, timeout: opts.timeoutMs ?? ATTEMPT_TIMEOUT_MS });
      const jsm = await jetstreamManager(nc, { timeout: 10_000 });
      return { nc, js: jetstream(nc, { timeout: 10_000 }), jsm };
    } catch (err) {
      const reason = await permanentFailure(err, failed);
      if (reason !== null) throw new ConfigError(reason, { cause: err });
      if (opts.timeoutMs !== undefined) throw err;
      if (attempt === 1 || attempt % 10 === 0) opts.log?.warn({ url: failed.shownUrl, attempt, err: (err as Error).message }, "waiting for NATS");
      await sleep(waitMs, undefined, opts.signal ? { signal: opts.signal } : {}).catch((cause: unknown) => {
        throw new StopRequestedError("stopped while waiting for NATS", { cause });
      });
      waitMs = Math.min(MAX_WAIT_MS, waitMs * 2);
    }
  }
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
      ...NO_EVICTION,
    },
    {
      name: EVENT_STREAM,
      subjects: [...EVENT_STREAM_SUBJECTS],
      max_age: nanos(stream.eventsMaxAgeS * 1000),
      duplicate_window: nanos(stream.eventsDuplicateWindowS * 1000),
      num_replicas: stream.replicas,
      ...NO_EVICTION,
    },
  ];
}

/**
 * The streams lose messages by age only (stream.maxAgeS, eventsMaxAgeS), which admission watches: a rollout about to
 * leave is rejected with a record. A count or byte limit (`nats stream edit --max-bytes`, the natural answer to a full
 * disk) would drop the oldest rollouts, handled or not — one waiting on a fault without a record, and with a
 * per-subject limit all but the last of a policy's — and the last announcement the samplers start from: such limits
 * an operator set are taken back at start, with the line naming them (docs/operations.md sizes the streams by age).
 */
const NO_EVICTION = { max_msgs: -1, max_bytes: -1, max_msgs_per_subject: -1 } as const;

/**
 * A missing stream is created, one whose subjects, age limit, duplicate window or replicas differ from the config
 * is updated (a log line names what changed); a change the server refuses fails the start (reconcile.ts).
 */
export async function ensureStreams(jsm: JetStreamManager, stream: Config["stream"], log?: Logger): Promise<void> {
  for (const wanted of streamConfigs(stream)) {
    try {
      await ensureStream(jsm, wanted, log);
    } catch (err) {
      // an account that requires limits (max_bytes_required) refuses to lift them: keep them, and say what they risk
      const { max_msgs, max_bytes, max_msgs_per_subject, ...rest } = wanted;
      if (!(err instanceof ConfigError) || (await ensureStream(jsm, rest, log).then(() => false, () => true))) throw err;
      log?.warn({ stream: wanted.name, err: err.message }, `stream ${wanted.name} keeps its count or byte limits (the server refused to lift them): a message not handled before they are reached is dropped without a record`);
    }
  }
}
