// A copy of the config safe to log or answer over NATS: credentials, the trainer's environment values and any
// user:password in the NATS URLs replaced.
import type { Config } from "./schema.js";

const HIDDEN = "[redacted]";

export function redactUrl(url: string): string {
  return url.replace(/\/\/[^@/]*@/g, `//${HIDDEN}@`);
}

export function redactedConfig(config: Config): Config {
  const hide = (v: string | null) => (v === null ? null : HIDDEN);
  const { nats, trainer } = config;
  return {
    ...config,
    nats: {
      ...nats,
      url: nats.url === null ? null : redactUrl(nats.url),
      pass: hide(nats.pass),
      token: hide(nats.token),
      tls: nats.tls === null ? null : { ...nats.tls, key: hide(nats.tls.key) },
    },
    trainer: { ...trainer, env: Object.fromEntries(Object.keys(trainer.env).map((k) => [k, HIDDEN])) },
  };
}
