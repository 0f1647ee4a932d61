// Runs of the trainer and of the Python reference on the trainer fixture (scripts/reference/train_fixture.py),
// and the comparisons of the Done-means tolerances.
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { pino } from "pino";
import { expect } from "vitest";
import { seededPermutation } from "../../src/train/batching.js";
import { CHAT_TEMPLATE, REFERENCE, ROOT, cacheKey, cachedDir, runPython } from "./train-fixtures.js";
import { readSafetensors } from "./safetensors.js";

export const PROMPT = "Target: {{ name }}\n{% if memory %}Memory: {{ memory[0] }} {{ memory[1] }}\n{% endif %}Write the behaviour code.";

export async function trainFixture(): Promise<string> {
  const scripts = ["train_fixture.py", "tiny_model.py", "make_tokenizer.py", "qwen_tokenizer_parts.py", "lora_golden.py", "test_images.py", "common.py"];
  return cachedDir("train-fixture", cacheKey([...scripts.map((s) => join(REFERENCE, s)), CHAT_TEMPLATE]), async (dir, final) => {
    await runPython("train_fixture.py", [CHAT_TEMPLATE, dir, final]);
    await writeFile(join(dir, "prompt.jinja"), PROMPT);
  });
}

export async function scratch(): Promise<string> {
  return mkdtemp(join(tmpdir(), "rlloop-train-run-"));
}

/** Runs `rlloop train` on the CPU in float32; returns its log lines (JSON) at `logLevel`; throws with stderr on failure. */
export async function rlloopTrain(args: string[], logLevel = "warn"): Promise<Record<string, unknown>[]> {
  const cli = join(ROOT, "test", "helpers", "train-cli.ts");
  const { stdout } = await execa(process.execPath, ["--import", "tsx", cli, "train", ...args, "--device", "cpu", "--dtype", "float32"], {
    cwd: ROOT,
    env: { RLLOOP_LOG_LEVEL: logLevel },
  });
  return stdout.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** The reference with rlloop's row order for one rank (seededPermutation per epoch), written to a file. */
export async function reference(mode: "sft" | "ppo", args: string[], rows: number, epochs: number, seed: number, dir: string) {
  const orders = Array.from({ length: epochs }, (_, e) => seededPermutation(rows, seed, e));
  const ordersFile = join(dir, `orders-${mode}-${Date.now()}.json`);
  await writeFile(ordersFile, JSON.stringify(orders));
  await runPython("seed_reference.py", [mode, ...args, "--orders", ordersFile, "--epochs", String(epochs)]);
}

/** A pino logger at info whose JSON lines land in `lines`, for tests that read a job's log. */
export function captureLog(lines: Record<string, unknown>[]) {
  return pino({ level: "info" }, { write: (text: string) => void lines.push(JSON.parse(text) as Record<string, unknown>) });
}

/** A PPO job's files in `dir` equal those in `plain`, bit for bit, stats.json but its seconds (train_s). */
export async function expectSamePpoFiles(dir: string, plain: string): Promise<void> {
  for (const file of ["adapter_model.safetensors", "optimizer.safetensors", "logp_gaps.json"]) {
    // a boolean, not the buffers: a failing toEqual on two files of this size takes minutes to print its diff
    expect((await readFile(join(dir, file))).equals(await readFile(join(plain, file))), file).toBe(true);
  }
  const stats = async (folder: string) => {
    const { train_s: _, ...rest } = JSON.parse(await readFile(join(folder, "stats.json"), "utf8")) as Record<string, unknown>;
    return rest;
  };
  expect(await stats(dir)).toEqual(await stats(plain));
}

/** A measured figure beside its tolerance, printed so that a test run reports what it measured. */
export function figure(label: string, measured: number, tolerance: number): void {
  console.info(`figure: ${label}: ${measured.toExponential(2)} (tolerance ${tolerance})`);
}

type Tensors = Map<string, { data: Float32Array | Int32Array }>;
const adapterOf = (dir: string) => readSafetensors(join(dir, "adapter_model.safetensors"));
const optimizerOf = async (dir: string) => ({
  moments: await readSafetensors(join(dir, "optimizer.safetensors")),
  step: (JSON.parse(await readFile(join(dir, "optimizer.json"), "utf8")) as { step: number }).step,
});

/** ‖w·(x − y)‖ / ‖w·y‖ (w = 1 when absent), in float64. */
function relativeL2(x: ArrayLike<number>, y: ArrayLike<number>, w?: ArrayLike<number>): number {
  let diff = 0, norm = 0;
  for (let i = 0; i < y.length; i++) {
    const k = w === undefined ? 1 : w[i]!;
    diff += (k * (x[i]! - y[i]!)) ** 2;
    norm += (k * y[i]!) ** 2;
  }
  return Math.sqrt(diff) / Math.max(Math.sqrt(norm), 1e-30);
}

/** One LoRA tensor's update (after − before), in float64; a tensor missing from `before` started at zero. */
function updates(before: Tensors, after: Tensors, key: string): Float64Array {
  const a = after.get(key)!.data;
  const b = before.get(key)?.data;
  return Float64Array.from(a, (v, i) => v - (b === undefined ? 0 : b[i]!));
}

/** Every LoRA tensor's update (after − before) of `actual` within `rtol` of `expected`'s, relative in L2 norm. */
export async function expectSameUpdates(before: string, actual: string, expected: string, rtol: number) {
  const [b, a, e] = await Promise.all([before, actual, expected].map(adapterOf));
  expect([...a!.keys()].sort()).toEqual([...e!.keys()].sort());
  let worst = 0;
  for (const key of e!.keys()) {
    const rel = relativeL2(updates(b!, a!, key), updates(b!, e!, key));
    worst = Math.max(worst, rel);
    expect(rel, `${key}: update differs by ${rel} relative`).toBeLessThanOrEqual(rtol);
  }
  return worst;
}

/**
 * The first AdamW step of a fresh optimizer (SFT), compared in AdamW's own metric: each element's difference
 * weighted by √v̂ + eps, v̂ the bias-corrected second moment of `expected`'s optimizer state (its squared clipped
 * gradient). That step moves an element by lr·g/(|g| + eps) ≈ lr·sign(g), so in the plain norm an element whose
 * gradient is below fp32 rounding noise, or near eps, counts as much as any other; weighted, the comparison is
 * lr·g against lr·g. Returns the worst weighted and the worst plain relative difference (the latter reported only).
 */
export async function expectSameFirstStep(before: string, actual: string, expected: string, rtol: number) {
  const [b, a, e] = await Promise.all([before, actual, expected].map(adapterOf));
  const { moments, step } = await optimizerOf(expected);
  expect(step).toBe(1);
  let worst = 0, worstPlain = 0;
  for (const key of e!.keys()) {
    const v = moments.get(`${key}.exp_avg_sq`)!.data;
    const w = Float64Array.from(v, (x) => Math.sqrt(x / (1 - 0.999 ** step)) + 1e-8);
    const [ua, ue] = [updates(b!, a!, key), updates(b!, e!, key)];
    const rel = relativeL2(ua, ue, w);
    worst = Math.max(worst, rel);
    worstPlain = Math.max(worstPlain, relativeL2(ua, ue));
    expect(rel, `${key}: first step differs by ${rel} relative (AdamW-weighted)`).toBeLessThanOrEqual(rtol);
  }
  return { worst, worstPlain };
}

/** AdamW's moments (exp_avg, exp_avg_sq per LoRA tensor) of two optimizer states within `rtol` (L2), same step. */
export async function expectSameMoments(actual: string, expected: string, rtol: number) {
  const [a, e] = await Promise.all([optimizerOf(actual), optimizerOf(expected)]);
  expect(a.step).toBe(e.step);
  expect([...a.moments.keys()].sort()).toEqual([...e.moments.keys()].sort());
  let worst = 0;
  for (const [key, want] of e.moments) {
    const rel = relativeL2(a.moments.get(key)!.data, want.data);
    worst = Math.max(worst, rel);
    expect(rel, `${key}: differs by ${rel} relative`).toBeLessThanOrEqual(rtol);
  }
  return worst;
}

/** Each shared numeric field within `atol` (the seed's 4-decimal rounding can move a value by up to 1e-4). */
export function expectFieldsClose(actual: Record<string, unknown>, expected: Record<string, unknown>, fields: string[], atol: number) {
  let worst = 0;
  for (const f of fields) {
    const diff = Math.abs((actual[f] as number) - (expected[f] as number));
    worst = Math.max(worst, diff);
    expect(diff, `${f}: ${actual[f]} vs ${expected[f]}`).toBeLessThanOrEqual(atol + 1e-9);
  }
  return worst;
}
