#!/usr/bin/env node
// TEST DOUBLE of a custom trainer.command for the daemon suites (the real trainer is tested on its own, and in
// loop-real-trainer.test.ts): the seed's flags (--data --adapter --ref --out --epochs --lr --batch --accumulation
// --seed), the seed's outputs (a PEFT-layout adapter dir: adapter_config.json + adapter_model.safetensors with a few
// small float32 LoRA tensors, optimizer.safetensors, stats.json with the seed's fields). It does no learning:
// the new tensors are the parent's plus a deterministic step from the rows' mean advantage; each row's log-prob gap
// (logp_gaps.json, and the stats' logp_gap) is -0.001·vllm_logp. It checks what the
// daemon promises the trainer: cwd is the job's folder, every row's image is a readable PNG relative to it.
// Test knobs (env):
//   FAKE_TRAINER_FAIL_ROUNDS / FAKE_TRAINER_NAN_ROUNDS: comma-separated round folder names ("000002") to fail / to
//     report NaN statistics for (a failing round whose probe trains: the daemon isolates its rows); NaN only for the
//     round's whole train.jsonl (a round that diverges as a whole while no part of it does);
//   FAKE_TRAINER_NAN_NAME: a step name; a job whose rows hold it reports NaN statistics (a rollout that makes
//     training diverge);
//   FAKE_TRAINER_FAIL_WHILE: a file; every job (the probe too) fails while it exists (a broken trainer or host);
//   FAKE_TRAINER_NAN_WHILE: a file; every job (the probe too) reports NaN statistics while it exists (a host that
//     computes garbage without an error);
//   FAKE_TRAINER_TORN_WHILE: a file; every job (the probe too) writes a truncated adapter_model.safetensors while it
//     exists, and finishes as if all were well (a trainer that does not sync, a disk that lost the file's tail);
//   FAKE_TRAINER_POISON: a step name; a job whose rows hold it crashes (a rollout that breaks training);
//   FAKE_TRAINER_NAN_WEIGHTS: a step name; a job whose rows hold it writes NaN weights with finite statistics (a
//     rollout whose last optimizer step diverges);
//   FAKE_TRAINER_SLEEP_MS: every job takes this long (a daemon can be killed while it trains);
//   FAKE_TRAINER_FILL_DISK: a file; the one job that finds <file>.after removes it, writes its outputs, then fills
//     the disk under <file> until the kernel refuses (ENOSPC) and ends well (a disk that fills right after a
//     training); the one that finds <file>.before fills it first, and fails on its own outputs (a disk that fills
//     during one).
// `fake-trainer.mjs init DIR` writes an initial adapter.
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, statSync, truncateSync, writeFileSync, writeSync } from "node:fs";
import { basename, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

const TENSORS = ["base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_A.weight", "base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_B.weight"];
const SHAPE = [2, 4];

function writeSafetensors(path, tensors) {
  let offset = 0;
  const header = {};
  const buffers = [];
  for (const [name, values] of Object.entries(tensors)) {
    const data = Buffer.from(new Float32Array(values).buffer);
    header[name] = { dtype: "F32", shape: SHAPE, data_offsets: [offset, offset + data.length] };
    offset += data.length;
    buffers.push(data);
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - (json.length % 8)) % 8);
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  writeFileSync(path, Buffer.concat([length, Buffer.from(json), ...buffers]));
}

function readSafetensors(path) {
  const bytes = readFileSync(path);
  const n = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString());
  const out = {};
  for (const [name, info] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const [a, b] = info.data_offsets;
    const slice = bytes.subarray(8 + n + a, 8 + n + b);
    out[name] = Array.from(new Float32Array(slice.buffer.slice(slice.byteOffset, slice.byteOffset + slice.length)));
  }
  return out;
}

function writeAdapter(dir, tensors) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "adapter_config.json"), JSON.stringify({
    peft_type: "LORA", r: 16, lora_alpha: 32, lora_dropout: 0, bias: "none", task_type: "CAUSAL_LM",
    target_modules: "model.language_model.*\\.(q_proj|k_proj|v_proj|o_proj)$", base_model_name_or_path: "fake",
  }, null, 2));
  writeSafetensors(join(dir, "adapter_model.safetensors"), tensors);
}

function args(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) if (argv[i].startsWith("--")) out[argv[i].slice(2)] = argv[++i];
  return out;
}

const argv = process.argv.slice(2);
if (argv[0] === "init") {
  writeAdapter(argv[1], Object.fromEntries(TENSORS.map((name, i) => [name, Array.from({ length: 8 }, (_, k) => (i + 1) * 0.01 * (k + 1))])));
  process.exit(0);
}

const a = args(argv.filter((x) => x !== "train" && x !== "ppo"));
for (const flag of ["data", "adapter", "ref", "out"]) if (!a[flag]) { console.error(`fake-trainer: --${flag} is required`); process.exit(2); }
const round = basename(process.cwd());
const listed = (name) => (process.env[name] ?? "").split(",").includes(round);
if (listed("FAKE_TRAINER_FAIL_ROUNDS")) { console.error(`fake-trainer: failing round ${round} as told`); process.exit(3); }
if (process.env.FAKE_TRAINER_FAIL_WHILE && existsSync(process.env.FAKE_TRAINER_FAIL_WHILE)) {
  console.error(`fake-trainer: broken while ${process.env.FAKE_TRAINER_FAIL_WHILE} exists`);
  process.exit(5);
}

if (process.env.FAKE_TRAINER_SLEEP_MS) await sleep(Number(process.env.FAKE_TRAINER_SLEEP_MS));
const rows = readFileSync(a.data, "utf8").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l));
const poison = process.env.FAKE_TRAINER_POISON;
if (poison && rows.some((r) => r.name === poison)) { console.error(`fake-trainer: row named ${poison} breaks training`); process.exit(6); }
for (const row of rows) {
  const png = readFileSync(row.image); // relative to cwd = the round folder
  if (png.readUInt32BE(0) !== 0x89504e47) { console.error(`fake-trainer: ${row.image} is not a PNG`); process.exit(4); }
}
const meanAdv = rows.reduce((s, r) => s + r.adv, 0) / rows.length;
const gap = rows.map((r) => -r.vllm_logp * 0.001);
const parent = readSafetensors(join(a.adapter, "adapter_model.safetensors"));
const diverges = process.env.FAKE_TRAINER_NAN_WEIGHTS && rows.some((r) => r.name === process.env.FAKE_TRAINER_NAN_WEIGHTS);
const next = Object.fromEntries(Object.entries(parent).map(([name, values]) => [name, values.map((v) => (diverges ? Number.NaN : v + 1e-3 * (1 + meanAdv)))]));
const ballast = process.env.FAKE_TRAINER_FILL_DISK;
const fillsDisk = (when) => ballast && existsSync(`${ballast}.${when}`) && (rmSync(`${ballast}.${when}`), true);
if (fillsDisk("before")) fillDisk(ballast);
const tmp = `${a.out}.writing`;
writeAdapter(tmp, next);
if (process.env.FAKE_TRAINER_TORN_WHILE && existsSync(process.env.FAKE_TRAINER_TORN_WHILE)) {
  const weights = join(tmp, "adapter_model.safetensors");
  truncateSync(weights, statSync(weights).size - 4);
}
writeSafetensors(join(tmp, "optimizer.safetensors"), next);
const nan = (listed("FAKE_TRAINER_NAN_ROUNDS") && basename(a.data) === "train.jsonl")
  || (process.env.FAKE_TRAINER_NAN_NAME && rows.some((r) => r.name === process.env.FAKE_TRAINER_NAN_NAME))
  || (process.env.FAKE_TRAINER_NAN_WHILE && existsSync(process.env.FAKE_TRAINER_NAN_WHILE));
const stats = {
  pg_loss: nan ? "NaN" : Number((-meanAdv * 0.01).toFixed(4)), kl: 0.001, clip_frac: 0,
  logp_gap: Number((gap.reduce((s, g) => s + g, 0) / rows.length).toFixed(4)),
  logp_gap_abs: Number((gap.reduce((s, g) => s + Math.abs(g), 0) / rows.length).toFixed(4)), rows: rows.length, train_s: 0,
  gpu_memory_bytes: 2 ** 30, // as the real trainer writes on a GPU
};
writeFileSync(join(tmp, "logp_gaps.json"), JSON.stringify({ gaps: gap }));
// Python's json.dumps writes NaN bare; so does this double, to exercise the daemon's lenient stats parser
writeFileSync(join(tmp, "stats.json"), JSON.stringify(stats).replace('"NaN"', "NaN"));
if (existsSync(a.out)) throw new Error(`${a.out} exists`);
renameSync(tmp, a.out);
if (fillsDisk("after")) fillDisk(ballast);
console.log(`PPO_DONE ${JSON.stringify(stats)}`);

function fillDisk(path) {
  const fd = openSync(path, "a");
  const block = Buffer.alloc(1 << 16, 1);
  try {
    for (;;) writeSync(fd, block);
  } catch (err) {
    if (err.code !== "ENOSPC") throw err;
  } finally {
    closeSync(fd);
  }
}
