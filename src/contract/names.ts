// NATS names of the loop: streams, buckets, the subject tree of one policy, message ids, the consumer. Every
// process that talks to the loop (daemon, rollout workers, reloader, monitors) takes its names from here.
//
// The subject tree is documented in one table, docs/daemon.md "NATS names" (test/contract-docs.test.ts keeps it
// equal to these functions): the event's kind is the last tokens of its subject, so a monitor filters on the server
// (`rlloop.<p>.round.>`, `rlloop.*.adapter.published`) instead of parsing every payload.

/** JetStream stream holding the rollouts of every policy, retained by limits so rounds can be replayed. */
export const ROLLOUT_STREAM = "RLLOOP_ROLLOUTS";
/** JetStream stream holding the durable daemon events: rejections, round lifecycle, adapters, replica loads. */
export const EVENT_STREAM = "RLLOOP_EVENTS";
/** KV bucket of the committed loop state, one key per policy. */
export const STATE_BUCKET = "rlloop";
/** KV bucket of the rollout ids consumed recently (the duplicate-id memory), keys `<policy>.<sha256(id)>`. */
export const IDS_BUCKET = "rlloop-ids";
/** Object store of published adapters, objects named `<policy>/r<round>/<file>`. */
export const ADAPTER_BUCKET = "rlloop-adapters";
/** Name of the NATS micro service (PING/INFO/STATS discovery plus `status` and `rounds` endpoints). */
export const SERVICE_NAME = "rlloop";

/** A policy name is one NATS subject token and one KV key: letters, digits, `_` and `-`. */
export const POLICY_NAME = /^[A-Za-z0-9_-]{1,64}$/;

export function assertPolicyName(policy: string): void {
  if (!POLICY_NAME.test(policy)) throw new TypeError(`policy name must match ${POLICY_NAME}, got ${JSON.stringify(policy)}`);
}

/** Every subject of one policy (see the table above). `round(kind)` and `replica(kind)` name one event kind. */
export function subjects(policy: string) {
  assertPolicyName(policy);
  const base = `rlloop.${policy}`;
  return {
    rollouts: `${base}.rollouts`,
    rejected: `${base}.rollout.rejected`,
    /** `round.<kind>` of one lifecycle event; `rounds` matches them all */
    round: (kind: string) => `${base}.round.${kind}`,
    rounds: `${base}.round.>`,
    adapterPublished: `${base}.adapter.published`,
    /** an earlier adapter to serve again (issue 23: the live-outcome guard, or rlloop rollback) */
    adapterRolledBack: `${base}.adapter.rolled_back`,
    /** every adapter announcement */
    adapters: `${base}.adapter.>`,
    replica: (kind: string) => `${base}.replica.${kind}`,
    replicas: `${base}.replica.>`,
    stats: `${base}.stats`,
    status: `${base}.svc.status`,
    roundsQuery: `${base}.svc.rounds`,
    /** request {"to_round": n, "reason"?} → the rollback's announcement, once the daemon has done it between rounds */
    rollbackRequest: `${base}.svc.rollback`,
  } as const;
}

/** The subject an event of `type` ("round.closed", "replica.loaded", ...) is published on. */
export function eventSubject(policy: string, type: string): string {
  assertPolicyName(policy);
  return `rlloop.${policy}.${type}`;
}

/** Subjects captured by the two streams, for all policies. */
export const ROLLOUT_STREAM_SUBJECTS = ["rlloop.*.rollouts"] as const;
export const EVENT_STREAM_SUBJECTS = ["rlloop.*.rollout.rejected", "rlloop.*.round.>", "rlloop.*.adapter.>", "rlloop.*.replica.>"] as const;

/** KV key of a policy's state record. */
export const stateKey = (policy: string): string => policy;
/** KV key (bucket `rlloop`) of a policy's lease: held by the one active daemon, expiring unless renewed. */
export const leaseKey = (policy: string): string => `${policy}.lease`;
/** Versioned adapter name vLLM serves: `<policy>-r<round>` (never loaded in place). */
export const adapterName = (policy: string, round: number): string => `${policy}-r${round}`;
/** Object-store prefix of a round's adapter; files are `<prefix>/adapter_config.json` etc., and the committed round's
 *  optimizer state and manifest.json beside them. */
export const adapterObjectPrefix = (policy: string, round: number): string => `${policy}/r${round}`;
/** Object-store prefix of a policy's frozen reference adapter (the KL term's). */
export const referenceObjectPrefix = (policy: string): string => `${policy}/reference`;
/** Durable consumer name of the daemon for a policy. */
export const consumerName = (policy: string): string => `rlloop-${policy}`;

/** Nats-Msg-Id of daemon-published events, so a restart that repeats a step publishes nothing twice. */
export const msgIds = {
  rejected: (policy: string, seq: number) => `${policy}.rejected.${seq}`,
  adapter: (policy: string, round: number) => `${policy}.adapter.r${round}`,
  rollback: (policy: string, seq: number) => `${policy}.rollback.${seq}`,
  round: (policy: string, round: number, suffix: string) => `${policy}.${suffix}.r${round}`,
};
