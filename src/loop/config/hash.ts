// The config hash recorded in manifests: the config without connection settings, credentials and the lease, keys
// sorted — two daemons training the same way (an active one and its standby) record the same hash wherever their NATS is.
import { createHash } from "node:crypto";
import type { Config } from "./schema.js";

export function configHash(config: Config): string {
  const { nats: _nats, lease: _lease, trainer, $schema: _schema, ...rest } = config;
  const { env: _env, ...trainerWithoutEnv } = trainer;
  return createHash("sha256").update(canonicalJson({ ...rest, trainer: trainerWithoutEnv })).digest("hex");
}

export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (typeof value === "object" && value !== null) {
    const record = value as Record<string, unknown>;
    return `{${Object.keys(record).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson(record[k])}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}
