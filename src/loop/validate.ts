// Bytes of a rollouts message → a validated RolloutCompleted, or a RolloutRejectedError whose reason code says what
// is wrong. Every check is bounded before the next one runs: size, then nesting depth (on the bytes), then JSON,
// then the schema (string lengths included), then the config's bounds on values. Messages never render the input
// recursively. Frames are checked later, by frames.ts, because that needs the filesystem and the object store.
import type { z } from "zod";
import { rolloutSchema, type RejectReason, type RolloutCompleted } from "../contract/index.js";
import type { Config } from "./config/index.js";
import { RolloutRejectedError } from "./errors.js";
import { nestsDeeperThan } from "./json-depth.js";

export interface ValidateContext {
  /** the policy of the subject the message arrived on */
  policy: string;
  codeLength: number;
  maxSteps: number;
  limits: Config["limits"];
}

export function validateContext(config: Config): ValidateContext {
  return { policy: config.policy.name, codeLength: config.policy.codeLength, maxSteps: config.policy.maxSteps, limits: config.limits };
}

const decoder = new TextDecoder("utf-8", { fatal: true });
const schemas = new WeakMap<Config["limits"], ReturnType<typeof rolloutSchema>>();

export function parseRollout(data: Uint8Array, ctx: ValidateContext): RolloutCompleted {
  const { limits } = ctx;
  if (data.length > limits.maxPayloadBytes) {
    throw new RolloutRejectedError("too_large", `payload has ${data.length} bytes, limits.maxPayloadBytes is ${limits.maxPayloadBytes}`);
  }
  if (nestsDeeperThan(data, limits.maxDepth)) {
    throw new RolloutRejectedError("too_deep", `payload nests deeper than limits.maxDepth ${limits.maxDepth}`);
  }
  const raw = parseJson(data);
  const parsed = schemaFor(limits).safeParse(raw);
  if (!parsed.success) throw rejectionFromIssues(parsed.error.issues, raw);
  const rollout = parsed.data;
  checkValues(rollout, ctx);
  return rollout;
}

/** Limits any admitted rollout is within, whatever the config said when it was admitted. */
const NO_LIMITS = { maxIdChars: Number.MAX_SAFE_INTEGER, maxNameChars: Number.MAX_SAFE_INTEGER, maxMemoryChars: Number.MAX_SAFE_INTEGER };
const admittedSchema = rolloutSchema(NO_LIMITS);

/**
 * A rollout read back from the stream for a round it was admitted to (its outcomes, poison isolation after a
 * restart): the contract's schema only. The config's bounds (limits, policy.maxSteps, codeLength) judged it when it
 * arrived; a config changed since must not turn a round already assembled into an error at every start.
 */
export function parseAdmittedRollout(data: Uint8Array): RolloutCompleted {
  const raw = parseJson(data);
  const parsed = admittedSchema.safeParse(raw);
  if (!parsed.success) throw rejectionFromIssues(parsed.error.issues, raw);
  return parsed.data;
}

/** The id of a payload that may be invalid (null when there is none or it is longer than maxChars). */
export function idOf(data: Uint8Array, maxDepth = 16, maxChars = 256): string | null {
  if (nestsDeeperThan(data, maxDepth)) return null;
  try {
    const id = (JSON.parse(decoder.decode(data)) as { id?: unknown } | null)?.id;
    return typeof id === "string" && id.length <= maxChars ? id : null;
  } catch {
    return null;
  }
}

function schemaFor(limits: Config["limits"]) {
  let schema = schemas.get(limits);
  if (!schema) {
    schema = rolloutSchema({ maxIdChars: limits.maxIdChars, maxNameChars: limits.maxNameChars, maxMemoryChars: limits.maxMemoryChars });
    schemas.set(limits, schema);
  }
  return schema;
}

/** No unpaired UTF-16 surrogate (JSON can carry one as an escape): ids are hashed and names tokenized as UTF-8, where
 *  every unpaired surrogate becomes U+FFFD, so two different ids would be one. */
const UNPAIRED_SURROGATE = /\p{Cs}/u;
/** Qwen's special tokens are spelled <|…|>; its tokenizer maps such text in a prompt to the token itself. */
const SPECIAL_TOKEN = /<\|[^|<>]*\|>/;

/**
 * The checks of an arriving rollout beyond the contract's schema: policy, step and code counts, meta size, value
 * bounds, and what would fail every training attempt of its round. A rollout read back for a round it was admitted
 * to (parseAdmittedRollout) is not judged by them again: rules added since must not make an admitted round unreadable.
 */
function checkValues(rollout: RolloutCompleted, ctx: ValidateContext) {
  const { limits } = ctx;
  const reject = (reason: RejectReason, message: string) => {
    throw new RolloutRejectedError(reason, message);
  };
  checkStrings(rollout);
  if (rollout.policy !== ctx.policy) reject("unknown_policy", `'policy' is ${quoted(rollout.policy)} but the event came on the subject of policy ${quoted(ctx.policy)}`);
  if (rollout.steps.length > ctx.maxSteps) reject("too_many_steps", `'steps' has ${rollout.steps.length} steps, policy.maxSteps is ${ctx.maxSteps}`);
  const metaBytes = Buffer.byteLength(JSON.stringify(rollout.meta));
  if (metaBytes > limits.maxMetaBytes) reject("meta_too_large", `unknown fields (${Object.keys(rollout.meta).slice(0, 5).map(quoted).join(", ")}) take ${metaBytes} bytes, limits.maxMetaBytes is ${limits.maxMetaBytes}`);
  const { min, max } = limits.reward;
  const outside = (x: number) => x < min || x > max;
  if (outside(rollout.reward)) reject("reward_out_of_range", `'reward' is ${rollout.reward}, limits.reward is [${min}, ${max}]`);
  rollout.steps.forEach((step, i) => {
    if (step.code.length !== ctx.codeLength) reject("code_length", `'steps.${i}.code' has ${step.code.length} digits, policy.codeLength is ${ctx.codeLength}`);
    if (step.reward !== undefined && outside(step.reward)) reject("reward_out_of_range", `'steps.${i}.reward' is ${step.reward}, limits.reward is [${min}, ${max}]`);
    if (step.vllm_logp < limits.minLogp) reject("logp_out_of_range", `'steps.${i}.vllm_logp' is ${step.vllm_logp}, limits.minLogp is ${limits.minLogp}`);
  });
}

function checkStrings(rollout: RolloutCompleted) {
  const invalid = (path: string, rule: string) => {
    throw new RolloutRejectedError("invalid_schema", `'${path}' ${rule}`);
  };
  const unpaired = "must be well-formed Unicode (it has an unpaired surrogate)";
  if (UNPAIRED_SURROGATE.test(rollout.id)) invalid("id", unpaired);
  if (rollout.group !== undefined && UNPAIRED_SURROGATE.test(rollout.group)) invalid("group", unpaired);
  if (UNPAIRED_SURROGATE.test(rollout.adapter.name)) invalid("adapter.name", unpaired);
  rollout.steps.forEach((step, i) => {
    if (UNPAIRED_SURROGATE.test(step.name)) invalid(`steps.${i}.name`, unpaired);
    // an <|image_pad|> in a name makes the row's image placeholders and its images disagree: the trainer fails
    if (SPECIAL_TOKEN.test(step.name)) invalid(`steps.${i}.name`, "must not contain special-token markup <|…|> (it would tokenize as the model's own tokens)");
    if ("path" in step.image && step.image.path.includes("\0")) invalid(`steps.${i}.image.path`, "must not contain a NUL character (no file has such a path)");
  });
}

function parseJson(data: Uint8Array): unknown {
  try {
    return JSON.parse(decoder.decode(data));
  } catch (cause) {
    throw new RolloutRejectedError("invalid_json", `payload is not valid UTF-8 JSON: ${(cause as Error).message.slice(0, 200)}`, { cause });
  }
}

/** Non-finite numbers and over-long strings get their own codes; anything else is invalid_schema. */
function rejectionFromIssues(issues: z.core.$ZodIssue[], raw: unknown): RolloutRejectedError {
  for (const issue of issues) {
    const value = valueAt(raw, issue.path);
    const path = issue.path.join(".");
    if (typeof value === "number" && !Number.isFinite(value)) {
      const field = issue.path[issue.path.length - 1];
      const reason: RejectReason | null = field === "reward" ? "non_finite_reward" : field === "vllm_logp" ? "non_finite_logp" : null;
      if (reason) return new RolloutRejectedError(reason, `'${path}' must be a finite number, got ${value}`);
    }
    if (issue.code === "too_big" && typeof value === "string") {
      return new RolloutRejectedError("string_too_long", `'${path}' has ${value.length} characters, at most ${String(issue.maximum)} allowed`);
    }
  }
  const issue = issues[0];
  if (!issue) return new RolloutRejectedError("invalid_schema", "payload does not match RolloutCompleted");
  const path = issue.path.join(".");
  if (path === "") return new RolloutRejectedError("invalid_schema", `payload must be a JSON object, got ${shown(raw)}`);
  return new RolloutRejectedError("invalid_schema", `'${path}' ${issue.message}, got ${shown(valueAt(raw, issue.path))}`);
}

function valueAt(raw: unknown, path: PropertyKey[]): unknown {
  let cur = raw;
  for (const key of path) cur = typeof cur === "object" && cur !== null ? (cur as Record<PropertyKey, unknown>)[key] : undefined;
  return cur;
}

/** A short rendering of an offending value: scalars as JSON, containers by their kind and size (never recursed). */
function shown(value: unknown): string {
  if (value === undefined) return "nothing";
  if (value === null || typeof value === "number" || typeof value === "boolean") return String(value);
  if (typeof value === "string") return quoted(value);
  if (Array.isArray(value)) return `an array of ${value.length}`;
  return `an object with keys ${Object.keys(value).slice(0, 5).map(quoted).join(", ") || "none"}`;
}

function quoted(text: string): string {
  const json = JSON.stringify(text.length > 80 ? `${text.slice(0, 77)}...` : text);
  return json;
}
