// The config's secrets, for the one redaction mechanism (src/redact.ts): registered when a config is parsed, so no
// log line, error or answer can carry them; and a copy of a config safe to log or answer over NATS.
import { registerSecrets, scrub, scrubValue } from "../../redact.js";
import type { Config } from "./schema.js";

/** URL credentials shown as [redacted]: the same scrubbing every log line gets. */
export const redactUrl = (url: string): string => scrub(url);

/** Registers the config's secret values: the NATS password, token and nkey seed, user:pass in URLs, the trainer's environment. */
export function registerConfigSecrets(config: Config): void {
  const { nats, trainer } = config;
  const inUrl = (nats.url ?? "").split(",").flatMap((url) => /\/\/([^@/\s]*)@/.exec(url)?.[1]?.split(":") ?? []);
  registerSecrets(nats.pass, nats.token, nats.nkeySeed, ...inUrl.map((part) => decodeURIComponent(part)), ...Object.values(trainer.env));
}

export function redactedConfig(config: Config): Config {
  return scrubValue(config) as Config;
}
