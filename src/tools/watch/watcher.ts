// Feeds a WatchState from a running loop: the daemon's service (`status` and `rounds` endpoints, once at start,
// for the current snapshot and the history) and live subscriptions to rlloop.<policy>.stats, .round.> and .replica.>.
// Messages that do not parse are ignored: a watcher must never die of what it watches.
import type { NatsConnection, Subscription } from "@nats-io/nats-core";
import { z } from "zod";
import { decodeMessage, ReplicaEvent, ROUNDS_QUERY_MAX, RoundEvent, RoundSummary, StatsEvent, subjects } from "../../contract/index.js";
import {
  initialState, withMissingRounds, withNotice, withReplica, withRoundEvent, withRoundSummaries, withStats, type WatchState,
} from "./watch-state.js";

export interface WatcherOptions {
  policy: string;
  /** shown in the header */
  source: string;
  maxRounds: number;
  /** for each request to the service */
  requestTimeoutMs: number;
}

export interface Watcher {
  state(): WatchState;
  stop(): Promise<void>;
}

/** The service's answer now: status snapshot and round history (a notice when it does not answer). */
export async function queryService(nc: NatsConnection, opts: WatcherOptions, nowMs: () => number = Date.now): Promise<WatchState> {
  const names = subjects(opts.policy);
  let state = initialState(opts.policy, opts.source, opts.maxRounds);
  const problems: string[] = [];
  try {
    const status = StatsEvent.parse((await nc.request(names.status, "", { timeout: opts.requestTimeoutMs })).json());
    state = withStats(state, status, nowMs());
  } catch (err) {
    problems.push(`no status from ${names.status}: ${(err as Error).message}`);
  }
  try {
    const reply = await nc.request(names.roundsQuery, JSON.stringify({ limit: Math.min(opts.maxRounds, ROUNDS_QUERY_MAX) }), { timeout: opts.requestTimeoutMs });
    state = withRoundSummaries(state, z.array(RoundSummary).parse(reply.json()));
  } catch (err) {
    problems.push(`no rounds from ${names.roundsQuery}: ${(err as Error).message}`);
  }
  return withNotice(state, problems.length > 0 ? problems.join("; ") : null);
}

/** Starts from the service's answer, then applies every live message; `onChange` gets each new state. */
export async function startWatcher(nc: NatsConnection, opts: WatcherOptions, onChange: (state: WatchState) => void, nowMs: () => number = Date.now): Promise<Watcher> {
  const names = subjects(opts.policy);
  let state: WatchState = initialState(opts.policy, opts.source, opts.maxRounds);
  const update = (next: WatchState) => {
    state = next;
    onChange(state);
  };
  // subscribe before querying, so nothing published in between is missed (events are idempotent on the state)
  const subs: Subscription[] = [];
  const follow = <T>(subject: string, schema: z.ZodType<T>, apply: (s: WatchState, value: T) => WatchState) => {
    const sub = nc.subscribe(subject);
    subs.push(sub);
    void (async () => {
      for await (const msg of sub) {
        const parsed = schema.safeParse(decodeMessage(msg.data));
        if (parsed.success) update(apply(state, parsed.data));
      }
    })();
  };
  // stats flowing means the daemon is up: a notice about the service not answering no longer applies
  follow(names.stats, StatsEvent, (s, v) => withNotice(withStats(s, v, nowMs()), null));
  follow(names.rounds, RoundEvent, withRoundEvent);
  follow(names.replicas, ReplicaEvent, withReplica);
  await nc.flush();

  const answered = await queryService(nc, opts, nowMs);
  // merge: the service's history under whatever live messages already arrived
  let merged = withNotice(state, answered.notice);
  if (answered.stats && !state.stats) merged = withStats(merged, answered.stats, answered.statsReceivedMs ?? nowMs());
  update(withMissingRounds(merged, answered.rounds));

  return {
    state: () => state,
    async stop() {
      for (const sub of subs) sub.unsubscribe();
    },
  };
}
