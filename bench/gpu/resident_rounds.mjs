// Resident round latency on the GPU machine: one resident rank (src/train/resident.ts, as the daemon runs it)
// loads the model once, then takes two PPO rounds back to back — round 1 from the starting adapter (ref = policy:
// one frozen pass), round 2 continuing round 1's adapter and optimizer state (ref differs: two frozen passes).
// Each round is timed from the job's submission to its adapter written.
// Usage: node bench/gpu/resident_rounds.mjs MODEL_DIR DATA_DIR OUT_DIR
import { join } from "node:path";
import pino from "pino";
import { ResidentTrainer } from "../../dist/train/resident.js";

const [modelDir, dataDir, outDir] = process.argv.slice(2);
const log = pino({ level: process.env.RLLOOP_LOG_LEVEL ?? "warn" }); // "info": the ranks' phase and progress lines
const loadStart = performance.now();
const trainer = await ResidentTrainer.start({
  model: { dir: modelDir, device: "cuda", dtype: "bfloat16", checkpointing: "auto" },
  ranks: 1,
  log,
});
console.log(JSON.stringify({ event: "ranks ready", seconds: (performance.now() - loadStart) / 1000 }));
const job = (adapter, out) => ({
  kind: "ppo", data: join(dataDir, "ppo.jsonl"), image_base: null, valid: null, adapter, ref: join(dataDir, "adapter"),
  out, epochs: 2, lr: 3e-6, batch: 16, accumulation: 2, max_updates: null, seed: 0, prompt: "bench/gpu/prompt.jinja",
  tis_cap: null, mismatch_stats: false,
});
try {
  let adapter = join(dataDir, "adapter");
  for (const round of [1, 2]) {
    const out = join(outDir, `round-${round}`);
    const start = performance.now();
    const result = await trainer.run(job(adapter, out));
    const seconds = (performance.now() - start) / 1000;
    console.log(JSON.stringify({ event: "round", round, seconds, rows: result.stats.rows, stats: result.stats }));
    adapter = out;
  }
} finally {
  await trainer.stop();
}
