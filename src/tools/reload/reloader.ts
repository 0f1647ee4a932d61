// The reloader (DESIGN.md step 8): follows rlloop.<policy>.adapter.published and brings every vLLM replica to each
// newly published adapter. Per announcement: fetch the adapter from object store rlloop-adapters to local disk once,
// verify sha256, then sync every replica and publish one event per replica on rlloop.<policy>.replica.<kind>:
// {type "replica.loaded", replica, name} or {type "replica.load_failed", replica, name, reason}.
//
// Each replica has its own lane: announcements run in order on it, independently of the other replicas, so one
// that is down (retrying with backoff) lags alone instead of delaying the next adapter everywhere; when it gets to
// an announcement that a newer one has superseded, it skips it (load_failed, "superseded") and moves on.
//
// It follows the announcements with an ordered consumer that starts at the last announcement of the policy, so a
// (re)started reloader first brings the replicas to the current adapter and then follows new ones; loading is
// idempotent (a name a replica already holds counts as loaded). Nothing an announcement or a replica does can
// stop the loop: failures become load_failed events and log lines.
//
// A rollback (issue 23) is an announcement too, on rlloop.<policy>.adapter.rolled_back: an earlier adapter to serve
// again, by its existing versioned name and its published files. Announcements are ordered by their stream
// sequence, not by round (a rollback's round is older than the last published), and the versions a replica keeps
// are the ones served last (replica-sync.ts), so the target is loaded back where it was unloaded and stays.
import { readdir, rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import { DeliverPolicy, jetstream, JetStreamApiCodes, JetStreamApiError, type JetStreamClient } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/nats-core";
import { Objm } from "@nats-io/obj";
import pRetry from "p-retry";
import type { Logger } from "pino";
import { decodeMessage, ADAPTER_BUCKET, AdapterPublished, AdapterRolledBack, EVENT_STREAM, eventSubject, subjects, type ReplicaEvent } from "../../contract/index.js";
import { fetchAdapter, isAdapterFetchError, localAdapterDir } from "./adapter-fetch.js";
import { keptRounds, syncReplica, type RetryPolicy, type SyncResult } from "./replica-sync.js";
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
  /** how often each replica is asked whether it still serves the newest adapter it loaded (null = never) */
  checkIntervalMs?: number | null;
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
  /** after each announcement has been handled on every replica (replicas move on independently before that) */
  onOutcome?: (outcome: AnnouncementOutcome) => void;
}

export async function startReloader(nc: NatsConnection, options: ReloaderOptions, log: Logger, hooks: ReloaderHooks = {}): Promise<Reloader> {
  // vLLM resolves a relative lora_path against its own working directory, not ours: send absolute paths
  const opts = { ...options, dir: resolve(options.dir) };
  if (opts.replicas.length === 0) throw new RangeError("reload needs at least one --vllm replica URL");
  if (!Number.isInteger(opts.keep) || opts.keep < 1) throw new RangeError(`'keep' must be a positive integer, got ${opts.keep}`);
  const js = jetstream(nc);
  const subj = subjects(opts.policy);
  const aborter = new AbortController();
  const clients = opts.replicas.map((url) => new VllmClient(url, { timeoutMs: opts.requestTimeoutMs, apiKey: opts.apiKey }));

  // The daemon creates the event stream; until it has, wait for it rather than fail.
  const consumer = await pRetry(
    () => js.consumers.get(EVENT_STREAM, { filter_subjects: [subj.adapterPublished, subj.adapterRolledBack], deliver_policy: DeliverPolicy.LastPerSubject }),
    {
      retries: Number.POSITIVE_INFINITY, minTimeout: 500, maxTimeout: 15_000, signal: aborter.signal,
      shouldRetry: ({ error }) => error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound,
      onFailedAttempt: ({ error }) => log.warn({ err: error.message }, `waiting for stream ${EVENT_STREAM}`),
    },
  );
  const messages = await consumer.consume();
  let lastRound = 0;
  let lastRollback = 0;
  /** the rounds announced to be served, in order (what replicas keep loaded) */
  const served: number[] = [];
  const lanes: Lane[] = clients.map(() => ({ tail: Promise.resolve(), loaded: 0, done: 0, serving: null, wanted: null, checking: false, retryAt: 0, failedChecks: 0 }));
  const fetches = new Map<number, { round: number; fetched: Promise<Fetched> }>(); // by announcement order, until every lane is past it
  const inFlight = new Set<Promise<void>>();
  const loop = (async () => {
    for await (const msg of messages) {
      const parsed = parseAnnouncement(msg.subject === subj.adapterRolledBack, decodeMessage(msg.string()), msg.seq);
      if (!parsed.success || parsed.data.policy !== opts.policy) {
        log.warn({ seq: msg.seq, issues: parsed.success ? "policy differs" : parsed.error.issues.slice(0, 3) }, "ignoring a malformed adapter announcement");
        continue;
      }
      const a = parsed.data;
      if (a.rollback === null ? a.round <= lastRound : a.rollback <= lastRollback) {
        log.info({ round: a.round, lastRound, rollback: a.rollback }, "ignoring an announcement not newer than the last handled");
        continue;
      }
      if (a.rollback === null) lastRound = a.round;
      else lastRollback = a.rollback;
      served.push(a.round);
      if (served.length > 64) served.shift();
      const handled = handleAnnouncement(a).then(
        (outcome) => {
          try {
            hooks.onOutcome?.(outcome);
          } catch (err) {
            log.error({ err, round: outcome.round }, "the onOutcome hook threw");
          }
        },
        // every expected failure becomes an event; this is the unexpected rest (a full disk)
        (err: unknown) => log.error({ err, round: a.round }, "announcement handling failed; following the next ones"),
      );
      inFlight.add(handled);
      void handled.finally(() => inFlight.delete(handled));
    }
    await Promise.all(inFlight);
  })();

  /** Queues the announcement on every replica's lane; resolves when every replica has handled it. */
  async function handleAnnouncement(a: Announcement): Promise<AnnouncementOutcome> {
    const alog = log.child({ round: a.round, adapter: a.name, ...(a.rollback === null ? {} : { rollback: a.rollback }) });
    const fetched: Promise<Fetched> = fetchWithRetry(a).then(
      (path) => ({ path }),
      (err: unknown) => {
        const reason = `fetch from ${ADAPTER_BUCKET} failed: ${err instanceof Error ? err.message : String(err)}`;
        alog.error({ reason }, "adapter not fetched; no replica loads it");
        return { reason };
      },
    );
    fetches.set(a.order, { round: a.round, fetched });
    const results = clients.map((client, i) => {
      const lane = lanes[i]!;
      const result = lane.tail.then(() => syncOnLane(client, lane, a, fetched, alog));
      lane.tail = result.then(() => undefined, () => undefined);
      return result;
    });
    return { round: a.round, name: a.name, results: await Promise.all(results) };
  }

  async function syncOnLane(client: VllmClient, lane: Lane, a: Announcement, fetched: Promise<Fetched>, alog: Logger): Promise<SyncResult> {
    const f = await fetched;
    const r = await loadOnReplica(client, lane, a, f);
    if (r.ok) {
      lane.loaded = a.order;
      if ("path" in f) lane.serving = { a, path: f.path };
      alog.info({ replica: r.replica, unloaded: r.unloaded, unloadErrors: r.unloadErrors, alreadyLoaded: r.alreadyLoaded }, "adapter loaded");
    } else {
      alog.error({ replica: r.replica, reason: r.reason }, "adapter load failed");
    }
    // housekeeping first, so an event means the announcement is completely handled on this replica
    if (opts.pruneLocal && r.ok && lanes.every((l) => l.loaded >= a.order)) await pruneLocalDirs(opts, served, alog);
    await publishEvent(js, toEvent(a, r), log);
    lane.done = a.order;
    const passed = Math.min(...lanes.map((l) => l.done));
    for (const order of fetches.keys()) if (order <= passed) fetches.delete(order);
    return r;
  }

  /** Loads the fetched adapter on one replica, unless it failed to fetch or a newer fetched round supersedes it. */
  async function loadOnReplica(client: VllmClient, lane: Lane, a: Announcement, f: Fetched): Promise<SyncResult> {
    if ("reason" in f) return { ok: false, replica: client.replica, name: a.name, reason: f.reason };
    const newer = await supersededBy(a.order);
    if (newer !== null) {
      return { ok: false, replica: client.replica, name: a.name, reason: `superseded by round ${newer} before this replica got to it` };
    }
    lane.wanted = { a, path: f.path };
    lane.failedChecks = 0;
    lane.retryAt = 0;
    return syncReplica(client, { policy: a.policy, round: a.round, name: a.name, path: f.path }, opts.keep, opts.retry, aborter.signal, served);
  }

  /** The round of the newest announcement after `order` whose adapter was fetched: a replica skips to it; null if none was. */
  async function supersededBy(order: number): Promise<number | null> {
    const newer = [...fetches.entries()].filter(([o]) => o > order).sort(([x], [y]) => y - x);
    for (const [, f] of newer) if ("path" in (await f.fetched)) return f.round;
    return null;
  }

  async function fetchWithRetry(a: Announcement): Promise<string> {
    return pRetry(async () => fetchAdapter(await new Objm(js).open(ADAPTER_BUCKET), a, opts.dir), {
      retries: opts.retry.retries, minTimeout: opts.retry.minTimeoutMs, maxTimeout: opts.retry.maxTimeoutMs,
      signal: aborter.signal,
      // a hash mismatch or a missing object will not fix itself; a NATS timeout may
      shouldRetry: ({ error }) => !isAdapterFetchError(error),
    });
  }

  /**
   * Each replica is asked now and then (on its lane, between announcements) whether it lists the newest adapter it
   * was to load, and given it when not. A vLLM that restarts forgets the adapters loaded at runtime, and nothing
   * announces that; a load that failed for good (the replica down past the retries, a shared file system not yet
   * showing the files, an out-of-memory) would else leave the replica on the adapter before until the next
   * announcement — and samplers asking for the newest one get nothing, so no round closes to announce another. The
   * older versions it kept are not restored: the newest is what samplers ask for.
   */
  async function checkReplica(client: VllmClient, lane: Lane): Promise<void> {
    if (lane.wanted === null || aborter.signal.aborted || Date.now() < lane.retryAt) return;
    const { a, path } = lane.wanted;
    // a newer announcement is on its way to this lane: that one is what to load
    if ([...fetches.keys()].some((order) => order > a.order)) return;
    const listed = await client.models().catch(() => null); // unreachable: the next check asks again
    if (listed === null || listed.some((m) => m.id === a.name)) return;
    const alog = log.child({ round: a.round, adapter: a.name });
    const forgot = lane.serving?.a === a;
    alog.warn({ replica: client.replica }, forgot ? "replica no longer lists the adapter (restarted?): loading it again" : "replica does not list the adapter its last load failed on: trying again");
    // one attempt: the next check is the retry, and an announcement queued meanwhile does not wait behind retries
    const r = await syncReplica(client, { policy: a.policy, round: a.round, name: a.name, path }, opts.keep, { ...opts.retry, retries: 0 }, aborter.signal, served);
    if (r.ok) {
      lane.serving = lane.wanted;
      lane.loaded = Math.max(lane.loaded, a.order);
      lane.failedChecks = 0;
      alog.info({ replica: r.replica }, forgot ? "adapter loaded again" : "adapter loaded");
    } else {
      // an adapter the replica refuses for good would else be tried, and reported, at every check
      const waitMs = Math.min((opts.checkIntervalMs ?? 0) * 2 ** ++lane.failedChecks, MAX_CHECK_BACKOFF_MS);
      lane.retryAt = Date.now() + waitMs;
      alog.error({ replica: r.replica, reason: r.reason, retryInMs: waitMs }, "adapter could not be loaded; tried again later");
    }
    await publishEvent(js, toEvent(a, r), log);
  }

  const checkTimer = opts.checkIntervalMs == null ? null : setInterval(() => {
    clients.forEach((client, i) => {
      const lane = lanes[i]!;
      if (lane.checking) return; // the last check has not run yet (the lane is busy): one is enough
      lane.checking = true;
      lane.tail = lane.tail.then(() => checkReplica(client, lane)).catch((err: unknown) => {
        log.error({ err, replica: client.replica }, "replica check failed");
      }).finally(() => {
        lane.checking = false;
      });
    });
  }, opts.checkIntervalMs);
  checkTimer?.unref();

  return {
    closed: loop,
    async stop() {
      if (checkTimer) clearInterval(checkTimer);
      aborter.abort();
      await messages.close();
      await loop;
    },
  };
}

/** The longest wait between checks that try an adapter a replica failed to load. */
const MAX_CHECK_BACKOFF_MS = 10 * 60_000;

/** A replica's queue of announcements: the tail of its work, the newest round loaded, and handled. */
interface Lane {
  tail: Promise<void>;
  loaded: number;
  done: number;
  /** the newest announcement this replica loaded, and the local copy it read */
  serving: { a: Announcement; path: string } | null;
  /** the newest announcement this replica was to load (fetched, not superseded when its lane got to it), loaded or not */
  wanted: { a: Announcement; path: string } | null;
  /** checks that failed to load `wanted` in a row, and when the next may try (a backoff) */
  failedChecks: number;
  retryAt: number;
  /** a check of this replica is queued on its lane */
  checking: boolean;
}

/** What to serve: a published adapter, or a rollback's target (its published files), in announcement order. */
type Announcement = Pick<AdapterPublished, "policy" | "round" | "name" | "files" | "sha256" | "object" | "bucket"> & {
  /** stream sequence of the announcement: what "newer" means */
  order: number;
  /** the rollback's seq; null for a published adapter */
  rollback: number | null;
};

function parseAnnouncement(rollback: boolean, value: unknown, order: number): { success: true; data: Announcement } | { success: false; error: { issues: unknown[] } } {
  const parsed = rollback ? AdapterRolledBack.safeParse(value) : AdapterPublished.safeParse(value);
  if (!parsed.success) return { success: false, error: { issues: parsed.error.issues } };
  const d = parsed.data;
  return { success: true, data: { policy: d.policy, round: d.round, name: d.name, files: d.files, sha256: d.sha256, object: d.object, bucket: d.bucket, order, rollback: "seq" in d ? d.seq : null } };
}

/** An announcement's adapter on local disk, or why it could not be fetched. */
type Fetched = { path: string } | { reason: string };

function toEvent(a: Announcement, r: SyncResult): ReplicaEvent {
  const at = new Date().toISOString();
  return r.ok
    ? { type: "replica.loaded", policy: a.policy, replica: r.replica, name: r.name, at }
    : { type: "replica.load_failed", policy: a.policy, replica: r.replica, name: r.name, reason: r.reason, at };
}

/** Events are observations, not commands: losing one to a NATS hiccup is logged, never fatal. */
async function publishEvent(js: JetStreamClient, event: ReplicaEvent, log: Logger): Promise<void> {
  try {
    await js.publish(eventSubject(event.policy, event.type), JSON.stringify(event));
  } catch (err) {
    log.warn({ err: (err as Error).message, event }, `could not publish ${event.type}`);
  }
}

/** Removes `<dir>/<policy>/r<n>` for all but the `keep` rounds replicas keep loaded (served last, replica-sync.ts). */
async function pruneLocalDirs(opts: ReloaderOptions, served: readonly number[], log: Logger): Promise<void> {
  const entries = await readdir(join(opts.dir, opts.policy)).catch(() => [] as string[]);
  const rounds = entries
    .map((e) => /^r(\d+)$/.exec(e))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]));
  const kept = new Set(keptRounds(served, rounds, opts.keep));
  for (const old of rounds.filter((r) => !kept.has(r))) {
    await rm(localAdapterDir(opts.dir, opts.policy, old), { recursive: true, force: true });
    log.debug({ round: old }, "pruned local adapter directory");
  }
}
