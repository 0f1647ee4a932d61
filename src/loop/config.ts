// The daemon's configuration: one zod schema (the single place of every default), loading from a JSON file plus
// RLLOOP_* environment overrides, and a hash for manifests. Field meanings are documented in config/README.md;
// config/default.json lists every default. Unknown keys and wrong types fail by name.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { ConfigError } from "./errors.js";
import { POLICY_NAME } from "./schema.js";

const positiveInt = () => z.number().int({ error: "must be an integer" }).positive({ error: "must be a positive integer" });
const nonNegativeInt = () => z.number().int({ error: "must be an integer" }).min(0, { error: "must be >= 0" });
const seconds = () => z.number().positive({ error: "must be a positive number of seconds" });
const threshold = () => z.number().nonnegative().nullable();

const Policy = z.strictObject({
  name: z.string().regex(POLICY_NAME, { error: `must match ${POLICY_NAME}` }).default("bt"),
  codeLength: positiveInt().default(6),
  maxSteps: positiveInt().default(64),
});

const Tls = z.strictObject({
  ca: z.string().nullable().default(null),
  cert: z.string().nullable().default(null),
  key: z.string().nullable().default(null),
});

const Nats = z.strictObject({
  url: z.string().nullable().default(null),
  user: z.string().nullable().default(null),
  pass: z.string().nullable().default(null),
  token: z.string().nullable().default(null),
  credsFile: z.string().nullable().default(null),
  tls: Tls.nullable().default(null),
  name: z.string().default("rlloop-daemon"),
  serverBin: z.string().nullable().default(null),
  serverHost: z.string().default("127.0.0.1"),
  serverPort: nonNegativeInt().default(0),
});

const Stream = z.strictObject({
  maxAgeS: seconds().default(30 * 86400),
  duplicateWindowS: seconds().default(600),
  eventsMaxAgeS: seconds().default(30 * 86400),
  eventsDuplicateWindowS: seconds().default(86400),
  replicas: positiveInt().default(1),
});

const Consumer = z.strictObject({
  ackWaitS: seconds().default(60),
  maxAckPending: positiveInt().nullable().default(null),
  fetchBatch: positiveInt().default(128),
});

const Frames = z.strictObject({
  roots: z.array(z.string()).default([]),
  objectBucket: z.string().default("rlloop-frames"),
  maxBytes: positiveInt().default(16 * 1024 * 1024),
  maxPixels: positiveInt().default(4096 * 4096),
});

const Round = z.strictObject({
  rows: positiveInt().default(256),
  groups: positiveInt().nullable().default(null),
  groupSize: positiveInt().nullable().default(null),
  maxWaitS: seconds().nullable().default(600),
  minRows: positiveInt().default(32),
});

const OffPolicy = z.strictObject({ maxStaleness: nonNegativeInt().default(1) });

const Advantage = z.strictObject({
  estimator: z.enum(["grpo", "rloo", "return"]).default("grpo"),
  eps: z.number().positive().default(1e-6),
  gamma: z.number().min(0).max(1).default(1),
});

const Adapter = z.strictObject({
  initial: z.string().nullable().default(null),
  reference: z.string().nullable().default(null),
});

const Trainer = z.strictObject({
  command: z.array(z.string()).min(1).nullable().default(null),
  resident: z.boolean().default(true),
  args: z.array(z.string()).default([]),
  env: z.record(z.string(), z.string()).default({}),
  seed: nonNegativeInt().default(0),
  maxAttempts: positiveInt().default(3),
  timeoutS: seconds().nullable().default(null),
});

const Gate = z.strictObject({
  maxLogpGapAbs: threshold().default(null),
  maxKl: threshold().default(null),
  maxClipFrac: threshold().default(null),
  maxMismatchKl: threshold().default(null),
});

const Intake = z.strictObject({ dedupRounds: positiveInt().default(64) });

const Observe = z.strictObject({
  statsIntervalS: seconds().default(10),
  metricsPort: nonNegativeInt().max(65535).nullable().default(9464),
  metricsHost: z.string().default("127.0.0.1"),
});

const Log = z.strictObject({ level: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info") });

export const ConfigSchema = z.strictObject({
  workDir: z.string().default("runs"),
  policy: Policy.prefault({}),
  nats: Nats.prefault({}),
  stream: Stream.prefault({}),
  consumer: Consumer.prefault({}),
  frames: Frames.prefault({}),
  round: Round.prefault({}),
  offPolicy: OffPolicy.prefault({}),
  advantage: Advantage.prefault({}),
  adapter: Adapter.prefault({}),
  trainer: Trainer.prefault({}),
  gate: Gate.prefault({}),
  intake: Intake.prefault({}),
  observe: Observe.prefault({}),
  log: Log.prefault({}),
});

export type Config = z.output<typeof ConfigSchema>;
export type ConfigInput = z.input<typeof ConfigSchema>;
export type AdvantageConfig = Config["advantage"];

/** Keys that were renamed: using the old one fails with a pointer to the new one. */
const RENAMED: Record<string, string> = {
  "round.size": "round.rows",
  "round.maxWait": "round.maxWaitS",
  "stats.intervalS": "observe.statsIntervalS",
};

/** Repository root (config/default.json lives there), found from this file in src/ or dist/. */
export const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const DEFAULT_CONFIG_FILE = join(PACKAGE_ROOT, "config", "default.json");

/** Validate a config object; relative paths stay as given (resolved against the CWD by resolvePaths). */
export function parseConfig(input: unknown): Config {
  refuseRenamed(input);
  const result = ConfigSchema.safeParse(input);
  if (!result.success) throw new ConfigError(result.error.issues.map((issue) => describeIssue(issue, input)).join("; "));
  checkCombinations(result.data);
  return deepFreeze(resolvePaths(result.data));
}

export interface LoadConfigOptions {
  /** JSON file; default config/default.json */
  file?: string;
  /** environment to read RLLOOP_* overrides from; default process.env */
  env?: Record<string, string | undefined>;
  /** programmatic overrides applied last (tests, CLI flags) */
  overrides?: ConfigInput;
}

export function loadConfig(options: LoadConfigOptions = {}): Config {
  const file = options.file ?? DEFAULT_CONFIG_FILE;
  let fromFile: unknown;
  try {
    fromFile = JSON.parse(readFileSync(file, "utf8"));
  } catch (cause) {
    throw new ConfigError(`cannot read config file ${file}: ${(cause as Error).message}`, { cause });
  }
  const merged = deepMerge(deepMerge(fromFile, envOverrides(options.env ?? process.env)), options.overrides ?? {});
  return parseConfig(merged);
}

// ---------------------------------------------------------------------------------------------------------------
// Environment overrides: RLLOOP_<SECTION>_<FIELD> with camelCase split into words, e.g.
// RLLOOP_NATS_URL, RLLOOP_ROUND_MAX_WAIT_S, RLLOOP_WORK_DIR. Values are JSON when they parse (numbers, null, arrays),
// else the raw string; a list field also accepts a comma-separated string. Other RLLOOP_* variables are ignored.

/** Every overridable path with its environment variable name. */
export function envTable(): Array<{ env: string; path: string[]; list: boolean }> {
  const defaults = ConfigSchema.parse({}) as Record<string, unknown>;
  const rows: Array<{ env: string; path: string[]; list: boolean }> = [];
  const walk = (value: unknown, path: string[]) => {
    if (isPlainObject(value) && path.length < 2 && Object.keys(value).length > 0) {
      for (const [key, child] of Object.entries(value)) walk(child, [...path, key]);
      return;
    }
    rows.push({ env: `RLLOOP_${path.map(snake).join("_")}`, path, list: Array.isArray(value) });
  };
  walk(defaults, []);
  return rows;
}

export function envOverrides(env: Record<string, string | undefined>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { env: name, path, list } of envTable()) {
    const raw = env[name];
    if (raw === undefined) continue;
    setPath(out, path, parseEnvValue(raw, list));
  }
  return out;
}

function parseEnvValue(raw: string, list: boolean): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return list ? raw.split(",").map((s) => s.trim()).filter(Boolean) : raw;
  }
}

const snake = (key: string) => key.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase();

// ---------------------------------------------------------------------------------------------------------------
// Hash (recorded in manifests): the config without credentials, keys sorted.

export function configHash(config: Config): string {
  const { nats: _nats, ...rest } = config;
  return createHash("sha256").update(canonicalJson(rest)).digest("hex");
}

export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (isPlainObject(value)) {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** A copy with credentials replaced, for logs and the service's INFO. */
export function redactedConfig(config: Config): Config {
  const hide = (v: string | null) => (v === null ? null : "[redacted]");
  return { ...config, nats: { ...config.nats, pass: hide(config.nats.pass), token: hide(config.nats.token) } };
}

// ---------------------------------------------------------------------------------------------------------------
// helpers

function resolvePaths(config: Config): Config {
  const abs = (p: string | null) => (p === null ? null : resolve(p));
  return {
    ...config,
    workDir: resolve(config.workDir),
    frames: { ...config.frames, roots: config.frames.roots.map((r) => resolve(r)) },
    adapter: { initial: abs(config.adapter.initial), reference: abs(config.adapter.reference) },
  };
}

/** Rules across fields, checked after the per-field ones. */
function checkCombinations(config: Config) {
  if (config.round.groups !== null && config.round.groupSize === null) {
    throw new ConfigError("'round.groups' needs 'round.groupSize' (the rollouts of a complete group), got round.groupSize null");
  }
}

function refuseRenamed(input: unknown) {
  if (!isPlainObject(input)) return;
  for (const [old, replacement] of Object.entries(RENAMED)) {
    const [section, key] = old.split(".") as [string, string];
    const sectionValue = input[section];
    if (isPlainObject(sectionValue) && key in sectionValue) {
      throw new ConfigError(`'${old}' was renamed to '${replacement}'`);
    }
  }
}

function describeIssue(issue: z.core.$ZodIssue, input: unknown): string {
  const path = issue.path.map(String).join(".");
  if (issue.code === "unrecognized_keys") {
    const where = path ? `'${path}'` : "config";
    return `${where} has unknown key(s) ${issue.keys.map((k) => `'${k}'`).join(", ")}`;
  }
  const value = getPath(input, issue.path.map(String));
  return `'${path}' ${issue.message}, got ${value === undefined ? "nothing" : JSON.stringify(value)}`;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function getPath(value: unknown, path: string[]): unknown {
  let cur = value;
  for (const key of path) cur = isPlainObject(cur) ? cur[key] : undefined;
  return cur;
}

function setPath(target: Record<string, unknown>, path: string[], value: unknown) {
  let cur = target;
  for (const key of path.slice(0, -1)) {
    if (!isPlainObject(cur[key])) cur[key] = {};
    cur = cur[key] as Record<string, unknown>;
  }
  cur[path[path.length - 1] as string] = value;
}

/** Objects merge key by key; anything else (arrays included) is replaced. Inputs are not modified. */
export function deepMerge(base: unknown, over: unknown): unknown {
  if (!isPlainObject(base) || !isPlainObject(over)) return over === undefined ? base : over;
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(over)) out[key] = deepMerge(base[key], value);
  return out;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}
