// `rlloop status`: the running daemon's answer on rlloop.<policy>.svc.status, or — when no daemon answers — the
// committed state record from KV.
import type { Config } from "./config.js";
import { connectNats } from "./connection.js";
import { runningOwnServerUrl } from "./nats-server.js";
import { subjects } from "./schema.js";
import { StateStore } from "./state.js";

export async function queryStatus(config: Config, timeoutMs: number): Promise<unknown> {
  const url = config.nats.url ?? runningOwnServerUrl(config.workDir);
  if (!url) return { daemon: null, reason: "no nats.url configured and no own nats-server running for this workDir" };
  const nats = await connectNats({ ...config.nats, name: "rlloop-status" }, url);
  try {
    try {
      const reply = await nats.nc.request(subjects(config.policy.name).status, "", { timeout: timeoutMs });
      return { daemon: reply.json() };
    } catch {
      const states = await StateStore.open(nats.nc, config.policy.name, config.stream.replicas);
      return { daemon: null, state: (await states.read())?.record ?? null };
    }
  } finally {
    await nats.nc.drain().catch(() => {});
  }
}
