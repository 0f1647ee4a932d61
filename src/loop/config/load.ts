// Loading the configuration: a JSON file, then RLLOOP_* environment overrides, then programmatic overrides, then
// the schema (schema.ts), then the rules across fields. Relative paths are resolved against the working directory.
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { z } from "zod";
import { ConfigError } from "../errors.js";
import { registerConfigSecrets } from "./redact.js";
import { ConfigSchema, type Config, type ConfigInput } from "./schema.js";

/** Keys that were renamed or removed: using one fails with what to write instead. */
const REPLACED: Record<string, (value: unknown) => string> = {
  "round.size": () => "'round.size' was renamed to 'round.rows'",
  "round.maxWait": () => "'round.maxWait' was renamed to 'round.maxWaitS'",
  "stats.intervalS": () => "'stats.intervalS' was renamed to 'observe.statsIntervalS'",
  "trainer.maxAttempts": () =>
    "'trainer.maxAttempts' was removed: a round whose trainer fails is retried until it trains (backoff trainer.retryMinS … trainer.retryMaxS), and only rollouts proven to break training are rejected (poison)",
  "trainer.args": (value) => `'trainer.args' was replaced by typed trainer fields: ${trainerArgsRewrite(value)}`,
};

/** Repository root (config/default.json lives there), found from this file in src/ or dist/. */
export const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const DEFAULT_CONFIG_FILE = join(PACKAGE_ROOT, "config", "default.json");

/** Validate a config object; relative paths are resolved against the working directory; its secrets are registered
 *  with the redaction of every log line (src/redact.ts). */
export function parseConfig(input: unknown): Config {
  refuseReplaced(input);
  const result = ConfigSchema.safeParse(input);
  if (!result.success) throw new ConfigError(result.error.issues.map((issue) => describeIssue(issue, input)).join("; "));
  checkCombinations(result.data);
  registerConfigSecrets(result.data);
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
  if (!isPlainObject(fromFile)) throw new ConfigError(`config file ${file} must hold a JSON object, got ${kindOf(fromFile)}`);
  const merged = deepMerge(deepMerge(fromFile, envOverrides(options.env ?? process.env)), options.overrides ?? {});
  return parseConfig(merged);
}

// ---------------------------------------------------------------------------------------------------------------
// Environment overrides: RLLOOP_<SECTION>_<FIELD> with camelCase split into words, e.g. RLLOOP_NATS_URL,
// RLLOOP_ROUND_MAX_WAIT_S, RLLOOP_WORK_DIR. Values are JSON when they parse (numbers, null, arrays), else the raw
// string; a list field also accepts a comma-separated string. Other RLLOOP_* variables are ignored.

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
// rules

function resolvePaths(config: Config): Config {
  const abs = (p: string | null) => (p === null ? null : resolve(p));
  return {
    ...config,
    workDir: resolve(config.workDir),
    frames: { ...config.frames, roots: config.frames.roots.map((r) => resolve(r)) },
    adapter: { initial: abs(config.adapter.initial), reference: abs(config.adapter.reference) },
    trainer: { ...config.trainer, model: abs(config.trainer.model), prompt: abs(config.trainer.prompt) },
  };
}

/** Rules across fields, checked after the per-field ones. */
function checkCombinations(config: Config) {
  const fail = (message: string) => {
    throw new ConfigError(message);
  };
  if (config.round.groups !== null && config.round.groupSize === null) {
    fail("'round.groups' needs 'round.groupSize' (the rollouts of a complete group), got round.groupSize null");
  }
  if (config.trainer.command === null && config.trainer.extraArgs.length > 0) {
    fail(`'trainer.extraArgs' is only for a custom 'trainer.command', got ${JSON.stringify(config.trainer.extraArgs)} without one`);
  }
  if (config.limits.reward.min > config.limits.reward.max) {
    fail(`'limits.reward' must have min <= max, got ${JSON.stringify(config.limits.reward)}`);
  }
  // without the statistics the gate would find none and reject every round
  if (config.gate.maxMismatchKl !== null && !config.trainer.mismatchStats && config.trainer.command === null) {
    fail(`'gate.maxMismatchKl' needs 'trainer.mismatchStats': true (the built-in trainer writes mismatch.k3 only then), got ${config.gate.maxMismatchKl} without it`);
  }
  // the server refuses a stream whose duplicate window is longer than its age limit (JetStream error 10052)
  for (const [window, age] of [["duplicateWindowS", "maxAgeS"], ["eventsDuplicateWindowS", "eventsMaxAgeS"]] as const) {
    if (config.stream[window] > config.stream[age]) {
      fail(`'stream.${window}' (${config.stream[window]}) must not exceed 'stream.${age}' (${config.stream[age]}): the server refuses a longer duplicate window`);
    }
  }
  if (config.trainer.retryMinS > config.trainer.retryMaxS) {
    fail(`'trainer.retryMinS' (${config.trainer.retryMinS}) must not exceed 'trainer.retryMaxS' (${config.trainer.retryMaxS})`);
  }
}

function refuseReplaced(input: unknown) {
  if (!isPlainObject(input)) return;
  for (const [old, message] of Object.entries(REPLACED)) {
    const [section, key] = old.split(".") as [string, string];
    const sectionValue = input[section];
    if (isPlainObject(sectionValue) && key in sectionValue) throw new ConfigError(message(sectionValue[key]));
  }
}

/** Flags of `rlloop train ppo` and the trainer fields that replace them. */
const FLAG_FIELDS: Record<string, { field: string; kind: "string" | "number" | "boolean" }> = {
  "--model": { field: "model", kind: "string" },
  "--device": { field: "device", kind: "string" },
  "--dtype": { field: "dtype", kind: "string" },
  "--gpus": { field: "gpus", kind: "number" },
  "--checkpointing": { field: "checkpointing", kind: "string" },
  "--tf32": { field: "tf32", kind: "string" },
  "--attention": { field: "attention", kind: "string" },
  "--epochs": { field: "epochs", kind: "number" },
  "--lr": { field: "lr", kind: "number" },
  "--batch": { field: "batch", kind: "number" },
  "--accumulation": { field: "accumulation", kind: "number" },
  "--prompt": { field: "prompt", kind: "string" },
  "--tis-cap": { field: "tisCap", kind: "number" },
  "--mismatch-stats": { field: "mismatchStats", kind: "boolean" },
};

/** What to write instead of an old `trainer.args` list, computed from the list itself. */
function trainerArgsRewrite(value: unknown): string {
  if (!Array.isArray(value) || value.length === 0) return "remove the empty 'trainer.args' and set 'trainer.model' (and any of epochs, lr, batch, accumulation, gpus, device, dtype, checkpointing, tf32, attention, prompt, tisCap, mismatchStats)";
  const fields: Record<string, unknown> = {};
  const unknown: string[] = [];
  for (let i = 0; i < value.length; i++) {
    const flag = String(value[i]);
    const known = FLAG_FIELDS[flag];
    if (!known) {
      unknown.push(flag);
      continue;
    }
    if (known.kind === "boolean") fields[known.field] = true;
    else fields[known.field] = known.kind === "number" ? Number(value[++i]) : String(value[++i]);
  }
  const rest = unknown.length > 0 ? `; not a trainer field: ${unknown.join(" ")}` : "";
  return `write "trainer": ${JSON.stringify(fields)} instead of "args": ${JSON.stringify(value)}${rest}`;
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

function kindOf(value: unknown): string {
  if (Array.isArray(value)) return "an array";
  return value === null ? "null" : `a ${typeof value}`;
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
