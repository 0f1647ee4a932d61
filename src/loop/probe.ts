// The probe: a tiny known-good training job (two rows on one synthetic frame, two codes, advantages +1 and −1: a real
// policy-gradient step, so a configuration that makes every update diverge shows in it too) run on the same
// trainer, from the same adapters, as the round that failed. It is the evidence that tells a fault of the trainer or
// its host (the probe fails too) from a fault of the round's rows (the probe trains): docs/daemon.md "Faults".
// The same job runs once before the first pull (trainer.probeAtStart), so a broken trainer stops the start.
import { mkdir, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import sharp from "sharp";
import { writeFileAtomic } from "../files.js";
import type { Config } from "./config/index.js";
import { nonFiniteStat } from "./gate.js";
import { removeJobOutput, roundJob } from "./round-job.js";
import type { RoundTrainer } from "./trainer.js";

export type ProbeResult = { ok: true } | { ok: false; error: string };

export class Probe {
  readonly dir: string;
  #ready: Promise<void> | null = null;
  #runs = 0;

  constructor(private readonly trainer: RoundTrainer, private readonly config: Config) {
    this.dir = join(config.workDir, "probe");
  }

  /** Trains the probe job from `adapter` (with `ref` as reference) into a scratch folder, removed afterwards. */
  async run(adapter: string, ref: string): Promise<ProbeResult> {
    // a preparation the disk refused is tried again on the next run, not remembered as failed
    await (this.#ready ??= this.#prepare().catch((err: unknown) => {
      this.#ready = null;
      throw err;
    }));
    const out = join(this.dir, `out-${process.pid}-${++this.#runs}`);
    const job = roundJob(this.config.trainer, { dir: this.dir, data: join(this.dir, "train.jsonl"), adapter, ref, out, seed: 0 });
    try {
      const stats = await this.trainer.train(job, { label: "probe", logFile: join(this.dir, "trainer.log") });
      // a trainer or host that computes garbage trains without an error: its statistics tell
      const garbage = nonFiniteStat(stats);
      return garbage === null ? { ok: true } : { ok: false, error: `the probe's ${garbage}` };
    } catch (err) {
      return { ok: false, error: (err as Error).message };
    } finally {
      await removeJobOutput(out);
    }
  }

  async #prepare(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    // what an earlier process's probes left (a save the disk refused, a process killed mid-job)
    const left = (await readdir(this.dir)).filter((n) => n.startsWith("out-"));
    await Promise.all(left.map((n) => rm(join(this.dir, n), { recursive: true, force: true })));
    const frame = await sharp({ create: { width: 128, height: 96, channels: 3, background: { r: 96, g: 128, b: 160 } } }).png().toBuffer();
    await writeFileAtomic(join(this.dir, "frame.png"), frame);
    const rows = [0, 1].map((i) => JSON.stringify({ image: "frame.png", name: `probe-${i}`, code: String(i).repeat(this.config.policy.codeLength), adv: i === 0 ? 1 : -1, vllm_logp: -1 }));
    await writeFileAtomic(join(this.dir, "train.jsonl"), `${rows.join("\n")}\n`);
  }
}
