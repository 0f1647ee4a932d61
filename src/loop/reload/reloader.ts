// The reloader (DESIGN.md step 8): follows rlloop.<policy>.adapters and brings every vLLM replica to each newly
// published adapter. Per announcement: fetch the adapter from object store rlloop-adapters to local disk once,
// verify sha256, then sync all replicas in parallel and publish one event per replica on rlloop.<policy>.reloads:
// {type "adapter.loaded", replica, name} or {type "adapter.load_failed", replica, name, reason}.
//
// It follows the announcements with an ordered consumer that starts at the last announcement of the policy, so a
// (re)started reloader first brings the replicas to the current adapter and then follows new ones; loading is
// idempotent (a name a replica already holds counts as loaded). Nothing an announcement or a replica does can
// stop the loop: failures become load_failed events and log lines.
import { readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { DeliverPolicy, jetstream, JetStreamApiCodes, JetStreamApiError, type JetStreamClient } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import { Objm } from "@nats-io/obj";
import pRetry from "p-retry";
import type { Logger } from "pino";
import { ADAPTER_BUCKET, AdapterPublished, EVENT_STREAM, subjects, type ReloadEvent } from "../schema.js";
import { fetchAdapter, isAdapterFetchError, localAdapterDir } from "./adapter-fetch.js";
import { syncReplica, type RetryPolicy, type SyncResult } from "./replica-sync.js";
import { VllmClient } from "./vllm-client.js";

export interface ReloaderOptions {
  policy: string;
  /** base URLs of the vLLM replicas, e.g. http://gpu1:8000 */
  replicas: string[];
  /** local root the adapters are written under (must be readable by the vLLM servers at the same path) */
  dir: string;
  /** versions of the policy each replica keeps loaded; keep > offPolicy.maxStaleness so in-flight rollouts finish */
  keep: number;
  retry: RetryPolicy;
  requestTimeoutMs: number;
  /** vLLM --api-key, if set */
  apiKey: string | null;
  /** delete local adapter directories older than the newest `keep` once every replica has moved on */
  pruneLocal: boolean;
}

export interface AnnouncementOutcome {
  round: number;
  name: string;
  results: SyncResult[];
}

export interface Reloader {
  /** resolves when the loop has ended (after stop(), or when the connection closes) */
  readonly closed: Promise<void>;
  stop(): Promise<void>;
}

export interface ReloaderHooks {
  /** after each announcement has been handled on every replica */
  onOutcome?: (outcome: AnnouncementOutcome) => void;
}

export async function startReloader(nc: NatsConnection, opts: ReloaderOptions, log: Logger, hooks: ReloaderHooks = {}): Promise<Reloader> {
  if (opts.replicas.length === 0) throw new RangeError("reload needs at least one --vllm replica URL");
  if (!Number.isInteger(opts.keep) || opts.keep < 1) throw new RangeError(`'keep' must be a positive integer, got ${opts.keep}`);
  const js = jetstream(nc);
  const subj = subjects(opts.policy);
  const aborter = new AbortController();
  const clients = opts.replicas.map((url) => new VllmClient(url, { timeoutMs: opts.requestTimeoutMs, apiKey: opts.apiKey }));

  // The daemon creates the event stream; until it has, wait for it rather than fail. One filter subject as a
  // string: a list needs nats-server 2.10.
  const consumer = await pRetry(
    () => js.consumers.get(EVENT_STREAM, { filter_subjects: subj.adapters, deliver_policy: DeliverPolicy.LastPerSubject }),
    {
      retries: Number.POSITIVE_INFINITY, minTimeout: 500, maxTimeout: 15_000, signal: aborter.signal,
      shouldRetry: ({ error }) => error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound,
      onFailedAttempt: ({ error }) => log.warn({ err: error.message }, `waiting for stream ${EVENT_STREAM}`),
    },
  );
  const messages = await consumer.consume();
  let lastRound = 0;
  const loop = (async () => {
    for await (const msg of messages) {
      const parsed = AdapterPublished.safeParse(parseJson(msg.string()));
      if (!parsed.success || parsed.data.policy !== opts.policy) {
        log.warn({ seq: msg.seq, issues: parsed.success ? "policy differs" : parsed.error.issues.slice(0, 3) }, "ignoring a malformed adapter announcement");
        continue;
      }
      if (parsed.data.round <= lastRound) {
        log.info({ round: parsed.data.round, lastRound }, "ignoring an announcement not newer than the last handled");
        continue;
      }
      lastRound = parsed.data.round;
      try {
        // not `onOutcome?.(await ...)`: an optional call skips evaluating its arguments when there is no hook
        const outcome = await handleAnnouncement(parsed.data);
        hooks.onOutcome?.(outcome);
      } catch (err) {
        // handleAnnouncement turns every expected failure into events; this is the unexpected rest (a full disk)
        log.error({ err, round: parsed.data.round }, "announcement handling failed; following the next ones");
      }
    }
  })();

  async function handleAnnouncement(a: AdapterPublished): Promise<AnnouncementOutcome> {
    const alog = log.child({ round: a.round, adapter: a.name });
    let path: string;
    try {
      path = await fetchWithRetry(a);
    } catch (err) {
      const reason = `fetch from ${ADAPTER_BUCKET} failed: ${err instanceof Error ? err.message : String(err)}`;
      alog.error({ reason }, "adapter not fetched; no replica loads it");
      const results = clients.map((c): SyncResult => ({ ok: false, replica: c.replica, name: a.name, reason }));
      await publishResults(a, results);
      return { round: a.round, name: a.name, results };
    }
    const target = { policy: a.policy, round: a.round, name: a.name, path };
    const results = await Promise.all(clients.map((c) => syncReplica(c, target, opts.keep, opts.retry, aborter.signal)));
    for (const r of results) {
      if (r.ok) alog.info({ replica: r.replica, unloaded: r.unloaded, unloadErrors: r.unloadErrors, alreadyLoaded: r.alreadyLoaded }, "adapter loaded");
      else alog.error({ replica: r.replica, reason: r.reason }, "adapter load failed");
    }
    // housekeeping first, so an event means the announcement is completely handled
    if (opts.pruneLocal && results.every((r) => r.ok)) await pruneLocalDirs(opts, a.round, alog);
    await publishResults(a, results);
    return { round: a.round, name: a.name, results };
  }

  async function fetchWithRetry(a: AdapterPublished): Promise<string> {
    return pRetry(async () => fetchAdapter(await new Objm(js).open(ADAPTER_BUCKET), a, opts.dir), {
      retries: opts.retry.retries, minTimeout: opts.retry.minTimeoutMs, maxTimeout: opts.retry.maxTimeoutMs,
      signal: aborter.signal,
      // a hash mismatch or a missing object will not fix itself; a NATS timeout may
      shouldRetry: ({ error }) => !isAdapterFetchError(error),
    });
  }

  async function publishResults(a: AdapterPublished, results: SyncResult[]): Promise<void> {
    for (const r of results) await publishEvent(js, subj.reloads, toEvent(a, r), log);
  }

  return {
    closed: loop,
    async stop() {
      aborter.abort();
      await messages.close();
      await loop;
    },
  };
}

function toEvent(a: AdapterPublished, r: SyncResult): ReloadEvent {
  const at = new Date().toISOString();
  return r.ok
    ? { type: "adapter.loaded", policy: a.policy, replica: r.replica, name: r.name, at }
    : { type: "adapter.load_failed", policy: a.policy, replica: r.replica, name: r.name, reason: r.reason, at };
}

/** Events are observations, not commands: losing one to a NATS hiccup is logged, never fatal. */
async function publishEvent(js: JetStreamClient, subject: string, event: ReloadEvent, log: Logger): Promise<void> {
  try {
    await js.publish(subject, JSON.stringify(event));
  } catch (err) {
    log.warn({ err: (err as Error).message, event }, `could not publish ${event.type}`);
  }
}

/** Removes `<dir>/<policy>/r<n>` for all but the newest `keep` rounds (by count, as replicas keep versions). */
async function pruneLocalDirs(opts: ReloaderOptions, round: number, log: Logger): Promise<void> {
  const entries = await readdir(join(opts.dir, opts.policy)).catch(() => [] as string[]);
  const rounds = entries
    .map((e) => /^r(\d+)$/.exec(e))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .filter((r) => r <= round)
    .sort((a, b) => b - a);
  for (const old of rounds.slice(opts.keep)) {
    await rm(localAdapterDir(opts.dir, opts.policy, old), { recursive: true, force: true });
    log.debug({ round: old }, "pruned local adapter directory");
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
