// `rlloop status`: the running daemon's answer on rlloop.<policy>.svc.status, or — when no daemon answers — the
// committed state record from KV.
import { redactUrl, type Config } from "./config/index.js";
import { connectNats } from "./connection.js";
import { ConfigError } from "./errors.js";
import { runningOwnServerUrl } from "./nats-server.js";
import { subjects } from "../contract/index.js";
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
      return { daemon: reply.json() };
    } catch {
      const states = await StateStore.open(nats.nc, config.policy.name, config.stream.replicas);
      return { daemon: null, state: (await states.read())?.record ?? null };
    }
  } finally {
    await nats.nc.drain().catch(() => {});
  }
}
