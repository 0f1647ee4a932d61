// How the operator commands reach NATS: --nats URL, else config nats.url (RLLOOP_NATS_URL), else the daemon's own
// nats-server for this workDir when one is running. Credentials and TLS come from the config, as for the daemon.
import type { Config } from "../loop/config/index.js";
import { connectNats, type Nats } from "../loop/connection.js";
import { ConfigError } from "../loop/errors.js";
import { scrub } from "../redact.js";
import { runningOwnServerUrl } from "../loop/nats-server.js";

export function natsUrl(config: Config, override: string | undefined): string {
  const url = override ?? config.nats.url ?? runningOwnServerUrl(config.workDir);
  if (!url) {
    throw new ConfigError(`no NATS server to talk to: pass --nats URL, set nats.url (RLLOOP_NATS_URL), or start the daemon with its own server in workDir ${config.workDir}`);
  }
  return url;
}

/** Connected, with `url` the server's address as it may be shown (credentials written into it redacted). */
export async function connectForCommand(config: Config, name: string, override: string | undefined): Promise<Nats & { url: string }> {
  const url = natsUrl(config, override);
  return { ...(await connectNats({ ...config.nats, name }, url)), url: scrub(url) };
}
