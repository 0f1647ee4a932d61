// `rlloop status`: the running daemon's answer on rlloop.<policy>.svc.status, or — when no daemon answers — the
// committed state record from KV; and who holds the policy's lease (the active daemon: host, work dir, pid, since).
import { redactUrl, type Config } from "./config/index.js";
import { connectNats } from "./connection.js";
import { ConfigError } from "./errors.js";
import { runningOwnServerUrl } from "./nats-server.js";
import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/nats-core";
import { decodeMessage, LeaseRecord, leaseKey, STATE_BUCKET, subjects } from "../contract/index.js";
import { StateStore } from "./state.js";

export async function queryStatus(config: Config, timeoutMs: number): Promise<unknown> {
  const url = config.nats.url ?? runningOwnServerUrl(config.workDir);
  if (!url) return { daemon: null, reason: "no nats.url configured and no own nats-server running for this workDir" };
  const nats = await connectNats({ ...config.nats, name: "rlloop-status" }, url, { timeoutMs }).catch((cause: Error) => {
    if (cause instanceof ConfigError) throw cause; // refused credentials, an untrusted certificate: the reason as it is
    throw new Error(`cannot reach NATS at ${redactUrl(url)} within ${timeoutMs} ms: ${cause.message}`, { cause });
  });
  try {
    try {
      const reply = await nats.nc.request(subjects(config.policy.name).status, "", { timeout: timeoutMs });
      return { daemon: decodeMessage(reply.data), lease: await leaseHolder(nats.nc, config.policy.name) };
    } catch {
      const states = await StateStore.open(nats.nc, config.policy.name, config.stream.replicas);
      return { daemon: null, state: (await states.read())?.record ?? null, lease: await leaseHolder(nats.nc, config.policy.name) };
    }
  } finally {
    await nats.nc.drain().catch(() => {});
  }
}

/** The lease record of the policy's active daemon, or null when none holds it (read only: nothing is created). */
async function leaseHolder(nc: NatsConnection, policy: string): Promise<LeaseRecord | null> {
  const kv = await new Kvm(nc).open(STATE_BUCKET).catch(() => null);
  const entry = await kv?.get(leaseKey(policy)).catch(() => null);
  if (!entry || entry.operation !== "PUT") return null;
  const parsed = LeaseRecord.safeParse(entry.json());
  return parsed.success ? parsed.data : null;
}
