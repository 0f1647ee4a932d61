// RolloutCompleted: what a rollout worker publishes on rlloop.<policy>.rollouts (one episode of the policy, served
// by one adapter), with the string limits that keep every event cheap to judge. schema/rollout-completed.schema.json
// is generated from this file (scripts/gen-schemas.ts) for workers in other languages.
import { z } from "zod";
import { finite, isoTimestamp, sha256Hex } from "./primitives.js";
import { POLICY_NAME } from "./names.js";

/** Length limits of a rollout's strings; the daemon's `limits` config section sets them (these are its defaults). */
export interface StringLimits {
  /** id, group, adapter.name */
  maxIdChars: number;
  /** a step's target name (it is part of the prompt) */
  maxNameChars: number;
  /** each of a step's two memory strings (part of the prompt) */
  maxMemoryChars: number;
}

export const DEFAULT_STRING_LIMITS: StringLimits = { maxIdChars: 256, maxNameChars: 256, maxMemoryChars: 256 };

/** A frame: a file under a configured frame root, an object in the frames object store, or inline base64. */
export const ImageRef = z.union([
  z.strictObject({ path: z.string().min(1).max(4096).meta({ description: "file under one of the daemon's frames.roots (relative paths: under the first root); no NUL character" }) }),
  z.strictObject({ object: z.string().min(1).max(1024).meta({ description: "object name in the daemon's frames object store (frames.objectBucket)" }) }),
  z.strictObject({ png_base64: z.string().min(1).meta({ description: "the encoded frame inline, base64 (PNG, JPEG or WebP bytes despite the name); limited by frames.maxBytes and the server's max_payload" }) }),
], { error: "must be exactly one of {path}, {object}, {png_base64}" }).meta({ description: "the camera frame of the step" });
export type ImageRef = z.infer<typeof ImageRef>;

function stepSchema(limits: StringLimits) {
  const bits = z.string().max(limits.maxMemoryChars).regex(/^[01]*$/, { error: "must be a string of 0/1" });
  return z.strictObject({
    image: ImageRef,
    name: z.string().min(1).max(limits.maxNameChars)
      .meta({ description: "target name the prompt names; well-formed Unicode, no special-token markup <|…|>" }),
    code: z.string().regex(/^[0-9]+$/, { error: "must be a string of digits" }).max(64)
      .meta({ description: "the sampled behaviour code, one digit per FSQ dimension (policy.codeLength digits)" }),
    vllm_logp: finite().max(0, { error: "must be <= 0 (a log-probability)" })
      .meta({ description: "vLLM's summed log-prob of the code tokens under the serving adapter (>= limits.minLogp)" }),
    memory: z.tuple([bits, bits]).optional().meta({ description: "the two memory strings of the prompt, when the rollout ran with memory" }),
    reward: finite().optional().meta({ description: "per-step reward, used by the `return` estimator; absent = 0" }),
  });
}

function shapeOf(limits: StringLimits) {
  const token = (what: string) => z.string().min(1).max(limits.maxIdChars).meta({ description: `${what}; well-formed Unicode` });
  return {
    id: token("unique id, also the Nats-Msg-Id of the publish"),
    policy: z.string().regex(POLICY_NAME, { error: `must match ${POLICY_NAME}` }).meta({ description: "the policy; must match the subject's" }),
    adapter: z.strictObject({
      round: z.number().int().min(0).meta({ description: "round whose adapter served the rollout (0 = the initial adapter)" }),
      name: token("the served adapter's versioned name, <policy>-r<round>"),
      sha256: sha256Hex().optional().meta({ description: "sha256 of its adapter_model.safetensors, checked when given" }),
    }).meta({ description: "the adapter that actually served the rollout" }),
    group: token("rollouts of the same scenario / start state share a group (grpo, rloo baselines)").optional(),
    reward: finite().meta({ description: "episode reward (within limits.reward)" }),
    steps: z.array(stepSchema(limits)).min(1, { error: "must have at least one step" }).meta({ description: "the decisions of the episode (1..policy.maxSteps)" }),
    created_at: isoTimestamp().optional().meta({ description: "when the episode ended" }),
  };
}

/**
 * RolloutCompleted under the given string limits. Any other top-level field is moved to `meta`: kept (its size is
 * limited by limits.maxMetaBytes), never trusted.
 */
export function rolloutSchema(limits: StringLimits = DEFAULT_STRING_LIMITS) {
  const shape = shapeOf(limits);
  return z.looseObject(shape).meta({ description: "one finished episode of the policy (rlloop.<policy>.rollouts)" }).transform((raw) => {
    const known: Record<string, unknown> = {};
    const meta: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(raw)) (key in shape ? known : meta)[key] = value;
    return { ...(known as z.infer<z.ZodObject<typeof shape>>), meta };
  });
}

export const RolloutCompleted = rolloutSchema();
/** Input type (what a publisher sends). */
export type RolloutCompletedInput = z.input<typeof RolloutCompleted>;
/** Validated type (what the daemon holds). */
export type RolloutCompleted = z.output<typeof RolloutCompleted>;
export type RolloutStep = RolloutCompleted["steps"][number];
export type AdapterRef = RolloutCompleted["adapter"];
