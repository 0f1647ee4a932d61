// The body of `rlloop reload`: configuration → reloader options, connect, run until a signal, stop cleanly.
import { join } from "node:path";
import { logger } from "../../log.js";
import { registerSecrets } from "../../redact.js";
import { loadConfig } from "../../loop/config/index.js";
/** `rlloop reload`'s options (src/cli/reload.ts). */
export interface ReloadFlags {
  config?: string;
  nats?: string;
  policy?: string;
  vllm: string[];
  dir?: string;
  keep?: number;
  retries: number;
  retryMinS: number;
  retryMaxS: number;
  timeoutS: number;
  checkIntervalS: number;
  prune: boolean;
}
import { connectForCommand } from "../connect.js";
import { startReloader } from "./reloader.js";

export async function runReload(flags: ReloadFlags): Promise<void> {
  const config = loadConfig(flags.config === undefined ? {} : { file: flags.config });
  const policy = flags.policy ?? config.policy.name;
  const log = logger("reload", { policy });
  const keep = flags.keep ?? config.offPolicy.maxStaleness + 1;
  if (keep <= config.offPolicy.maxStaleness) {
    // the daemon still accepts rollouts from those versions; workers asking vLLM for them would get 404s
    log.warn({ keep, maxStaleness: config.offPolicy.maxStaleness }, "--keep is not above offPolicy.maxStaleness: in-flight rollouts may ask for an unloaded adapter");
  }
  const nats = await connectForCommand(config, "rlloop-reload", flags.nats);
  const reloader = await startReloader(nats.nc, {
    policy,
    replicas: flags.vllm,
    dir: flags.dir ?? join(config.workDir, "reloader"),
    keep,
    retry: { retries: flags.retries, minTimeoutMs: flags.retryMinS * 1000, maxTimeoutMs: flags.retryMaxS * 1000 },
    requestTimeoutMs: flags.timeoutS * 1000,
    apiKey: apiKey(),
    pruneLocal: flags.prune,
    checkIntervalMs: flags.checkIntervalS > 0 ? flags.checkIntervalS * 1000 : null,
  }, log, { onOutcome: (o) => log.info({ round: o.round, adapter: o.name, loaded: o.results.filter((r) => r.ok).length, replicas: o.results.length }, "announcement handled") });
  log.info({ replicas: flags.vllm, keep, nats: nats.url }, "reloader following adapter announcements");
  const stop = () => void reloader.stop();
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  try {
    await reloader.closed;
  } finally {
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
    await nats.nc.drain().catch(() => {});
  }
}

/** VLLM_API_KEY, registered with the redaction of every log line. */
function apiKey(): string | null {
  const key = process.env.VLLM_API_KEY || null;
  registerSecrets(key);
  return key;
}
