// Bytes of a rollouts message → a validated RolloutCompleted, or a RolloutRejectedError whose reason code says
// what is wrong (zod issues are mapped to the specific codes the reject table promises). Frames are checked
// later, by frames.ts, because that needs the filesystem and the object store.
import type { z } from "zod";
import { RolloutRejectedError } from "./errors.js";
import { RolloutCompleted, type RejectReason } from "./schema.js";

export interface ValidateContext {
  /** the policy of the subject the message arrived on */
  policy: string;
  codeLength: number;
  maxSteps: number;
}

const decoder = new TextDecoder("utf-8", { fatal: true });

export function parseRollout(data: Uint8Array, ctx: ValidateContext): RolloutCompleted {
  const raw = parseJson(data);
  const parsed = RolloutCompleted.safeParse(raw);
  if (!parsed.success) throw rejectionFromIssues(parsed.error.issues, raw);
  const rollout = parsed.data;
  if (rollout.policy !== ctx.policy) {
    throw new RolloutRejectedError("unknown_policy", `'policy' is ${JSON.stringify(rollout.policy)} but the event came on the subject of policy ${JSON.stringify(ctx.policy)}`);
  }
  if (rollout.steps.length > ctx.maxSteps) {
    throw new RolloutRejectedError("too_many_steps", `'steps' has ${rollout.steps.length} steps, policy.maxSteps is ${ctx.maxSteps}`);
  }
  rollout.steps.forEach((step, i) => {
    if (step.code.length !== ctx.codeLength) {
      throw new RolloutRejectedError("code_length", `'steps.${i}.code' has ${step.code.length} digits, policy.codeLength is ${ctx.codeLength}`);
    }
  });
  return rollout;
}

/** The id of a payload that may be invalid, for the rejection event (null when there is none). */
export function idOf(data: Uint8Array): string | null {
  try {
    const value = JSON.parse(decoder.decode(data)) as unknown;
    const id = (value as { id?: unknown } | null)?.id;
    return typeof id === "string" && id.length <= 256 ? id : null;
  } catch {
    return null;
  }
}

function parseJson(data: Uint8Array): unknown {
  try {
    return JSON.parse(decoder.decode(data));
  } catch (cause) {
    throw new RolloutRejectedError("invalid_json", `payload is not valid UTF-8 JSON: ${(cause as Error).message}`, { cause });
  }
}

/** Non-finite numbers get their own codes (1e999 parses to Infinity); anything else is invalid_schema. */
function rejectionFromIssues(issues: z.core.$ZodIssue[], raw: unknown): RolloutRejectedError {
  for (const issue of issues) {
    const value = valueAt(raw, issue.path);
    if (typeof value !== "number" || Number.isFinite(value)) continue;
    const field = issue.path[issue.path.length - 1];
    const reason: RejectReason | null = field === "reward" ? "non_finite_reward" : field === "vllm_logp" ? "non_finite_logp" : null;
    if (reason) return new RolloutRejectedError(reason, `'${issue.path.join(".")}' must be a finite number, got ${value}`);
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

/** A short rendering of an offending value (never the whole payload: frames are megabytes of base64). */
function shown(value: unknown): string {
  if (value === undefined) return "nothing";
  if (typeof value === "number") return String(value);
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
