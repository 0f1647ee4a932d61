// A table of malformed rollout events for the daemon's rejection tests and demos (`rlloop simulate --bad`).
// Each case starts from a valid simulated rollout and breaks one thing; `expect` is the reject reason the daemon
// should record on rlloop.<policy>.rejected. Payloads are raw bytes because several cases are not valid JSON, or
// use JSON that parses to a value no publisher could produce through JSON.stringify (1e999 parses to Infinity).
import sharp from "sharp";
import type { RejectReason, RolloutCompletedInput } from "../../contract/index.js";

export interface BadEvent {
  /** stable label, also part of the event id */
  label: string;
  expect: RejectReason;
  /** what is wrong, for humans */
  what: string;
  /** Nats-Msg-Id of the publish (unique per case and run) */
  id: string;
  payload: Uint8Array;
}

export interface BadEventContext {
  /** a valid rollout to break (its id is replaced per case) */
  valid: RolloutCompletedInput;
  runTag: string;
  /** the policy's code length and step limit, as the daemon is configured */
  codeLength: number;
  maxSteps: number;
  /** the daemon's frames.maxPixels */
  maxPixels: number;
  /** a frame root the daemon accepts, when frames are passed by path (enables the image_missing case) */
  frameRoot: string | null;
}

type Case = {
  label: string;
  expect: RejectReason;
  what: string;
  make: (event: RolloutCompletedInput, ctx: BadEventContext) => Promise<string> | string;
};

const json = (event: unknown) => JSON.stringify(event);
const firstStep = (event: RolloutCompletedInput) => event.steps[0] as RolloutCompletedInput["steps"][number];
const withStep = (event: RolloutCompletedInput, patch: Record<string, unknown>) =>
  ({ ...event, steps: [{ ...firstStep(event), ...patch }, ...event.steps.slice(1)] });

const CASES: Case[] = [
  { label: "malformed-json", expect: "invalid_json", what: "truncated JSON text", make: (e) => json(e).slice(0, 40) },
  { label: "not-an-object", expect: "invalid_schema", what: "a JSON array instead of an object", make: () => "[1,2,3]" },
  {
    label: "missing-id", expect: "invalid_schema", what: "no id field",
    make: (e) => { const { id: _id, ...rest } = e; return json(rest); },
  },
  { label: "wrong-policy", expect: "unknown_policy", what: "policy differs from the subject's", make: (e) => json({ ...e, policy: `${e.policy}-other` }) },
  { label: "reward-infinite", expect: "non_finite_reward", what: "episode reward 1e999 (parses to Infinity)", make: (e) => json({ ...e, reward: 0 }).replace('"reward":0', '"reward":1e999') },
  { label: "reward-string", expect: "invalid_schema", what: 'episode reward "NaN" (a string)', make: (e) => json({ ...e, reward: "NaN" }) },
  {
    label: "logp-infinite", expect: "non_finite_logp", what: "vllm_logp -1e999 (parses to -Infinity)",
    make: (e) => json(withStep(e, { vllm_logp: -12345.5 })).replace('"vllm_logp":-12345.5', '"vllm_logp":-1e999'),
  },
  { label: "logp-positive", expect: "invalid_schema", what: "vllm_logp 0.5 (a log-probability is <= 0)", make: (e) => json(withStep(e, { vllm_logp: 0.5 })) },
  {
    label: "code-short", expect: "code_length", what: "code one digit shorter than policy.codeLength",
    make: (e, ctx) => json(withStep(e, { code: "1".repeat(Math.max(1, ctx.codeLength - 1)) })),
  },
  {
    label: "code-long", expect: "code_length", what: "code one digit longer than policy.codeLength",
    make: (e, ctx) => json(withStep(e, { code: "1".repeat(ctx.codeLength + 1) })),
  },
  { label: "code-not-digits", expect: "invalid_schema", what: "code with a letter", make: (e, ctx) => json(withStep(e, { code: `a${"1".repeat(ctx.codeLength - 1)}` })) },
  { label: "no-steps", expect: "invalid_schema", what: "an empty steps list", make: (e) => json({ ...e, steps: [] }) },
  {
    label: "too-many-steps", expect: "too_many_steps", what: "policy.maxSteps + 1 steps",
    make: async (e, ctx) => {
      // small frames keep maxSteps + 1 steps under the server's max_payload (1 MiB by default)
      const tiny = await sharp({ create: { width: 32, height: 24, channels: 3, background: "#4070a0" } }).png().toBuffer();
      const step = { ...firstStep(e), image: { png_base64: tiny.toString("base64") } };
      return json({ ...e, steps: Array.from({ length: ctx.maxSteps + 1 }, () => step) });
    },
  },
  { label: "memory-not-bits", expect: "invalid_schema", what: 'memory ["01x", "1"]', make: (e) => json(withStep(e, { memory: ["01x", "1"] })) },
  { label: "adapter-round-negative", expect: "invalid_schema", what: "adapter.round -1", make: (e) => json({ ...e, adapter: { ...e.adapter, round: -1 } }) },
  {
    label: "adapter-unknown", expect: "unknown_adapter", what: "served by a round the loop never published",
    make: (e) => json({ ...e, adapter: { round: 999_999, name: `${e.policy}-r999999` } }),
  },
  {
    label: "image-two-kinds", expect: "invalid_schema", what: "image with both path and png_base64",
    make: (e) => json(withStep(e, { image: { path: "/tmp/a.png", png_base64: "AAAA" } })),
  },
  { label: "path-escape", expect: "image_outside_roots", what: "frame path ../../../etc/passwd", make: (e) => json(withStep(e, { image: { path: "../../../etc/passwd" } })) },
  { label: "path-absolute-outside", expect: "image_outside_roots", what: "frame path /etc/hostname", make: (e) => json(withStep(e, { image: { path: "/etc/hostname" } })) },
  {
    label: "image-not-an-image", expect: "image_format", what: "png_base64 of plain text",
    make: (e) => json(withStep(e, { image: { png_base64: Buffer.from("this is not an image, just text").toString("base64") } })),
  },
  {
    label: "image-truncated", expect: "image_corrupt", what: "the first 100 bytes of a PNG",
    make: (e) => {
      const image = firstStep(e).image;
      const bytes = "png_base64" in image ? Buffer.from(image.png_base64, "base64") : Buffer.alloc(0);
      return json(withStep(e, { image: { png_base64: bytes.subarray(0, 100).toString("base64") } }));
    },
  },
  {
    label: "image-too-large", expect: "image_too_large", what: "a PNG with one pixel more than frames.maxPixels",
    make: async (e, ctx) => {
      const side = Math.ceil(Math.sqrt(ctx.maxPixels + 1));
      const png = await sharp({ create: { width: side, height: side, channels: 3, background: "#808080" } }).png({ compressionLevel: 9 }).toBuffer();
      return json(withStep(e, { image: { png_base64: png.toString("base64") } }));
    },
  },
  {
    label: "image-thin", expect: "image_shape", what: "a 201x1 PNG: an aspect ratio the model's image processor refuses",
    make: async (e) => {
      const png = await sharp({ create: { width: 201, height: 1, channels: 3, background: "#808080" } }).png().toBuffer();
      return json(withStep(e, { image: { png_base64: png.toString("base64") } }));
    },
  },
  {
    label: "name-special-token", expect: "invalid_schema", what: "a step name holding <|image_pad|>, the model's image placeholder token",
    make: (e) => json(withStep(e, { name: "cup <|image_pad|>" })),
  },
];

/** A frame path under an accepted root that does not exist. */
const MISSING_FRAME: Case = {
  label: "image-missing", expect: "image_missing", what: "a frame path under a frame root that does not exist",
  make: (e, ctx) => json(withStep(e, { image: { path: `${ctx.frameRoot}/missing/does-not-exist.png` } })),
};

export async function badEvents(ctx: BadEventContext): Promise<BadEvent[]> {
  const cases = ctx.frameRoot === null ? CASES : [...CASES, MISSING_FRAME];
  const out: BadEvent[] = [];
  for (const c of cases) {
    const id = `${ctx.runTag}-bad-${c.label}`;
    const text = await c.make({ ...ctx.valid, id }, ctx);
    out.push({ label: c.label, expect: c.expect, what: c.what, id, payload: new TextEncoder().encode(text) });
  }
  return out;
}

/** Labels of the table, for `--help` and docs. */
export const BAD_EVENT_LABELS = [...CASES, MISSING_FRAME].map((c) => c.label);
