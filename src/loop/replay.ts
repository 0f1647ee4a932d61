// `rlloop replay --round N [--out DIR] [--train]` (DESIGN.md data flow step 10): re-read the events round N's
// manifest names from the stream by sequence, rebuild train.jsonl (same validation, same advantage config — the
// manifest's), check its sha256 against the manifest, materialise the frames into DIR/frames, and with --train
// re-run the round from the manifest's parent adapter into DIR/adapter. The live state is never touched.
import { access, copyFile, mkdir } from "node:fs/promises";
import { join } from "node:path";
import { trainJsonl, TRAIN_FILE, type RoundRollout } from "./assemble.js";
import type { Config } from "./config/index.js";
import { connectNats } from "./connection.js";
import { ReplayMismatchError } from "./errors.js";
import { sha256, writeFileAtomic } from "../files.js";
import { frameObjectOpener } from "./frame-objects.js";
import { FrameRoots } from "./frame-roots.js";
import { frameBytes, writeFramePng, type FrameLimits } from "./frames.js";
import { readManifest, type Manifest } from "./manifest.js";
import { runningOwnServerUrl } from "./nats-server.js";
import { frameFileName, policyDir, roundDir } from "./paths.js";
import type { PpoStats } from "../contract/index.js";
import { CliRoundTrainer } from "./cli-trainer.js";
import { roundJob } from "./round-job.js";
import { readRoundRollouts } from "./round-rollouts.js";
import type { RoundTrainer } from "./trainer.js";
import { validateContext } from "./validate.js";

export interface ReplayOptions {
  config: Config;
  round: number;
  /** default <workDir>/replay/<policy>/<round:06d> */
  out?: string;
  train?: boolean;
  trainer?: RoundTrainer;
  /** NATS URL; default config.nats.url */
  url?: string;
}

export interface ReplayResult {
  out: string;
  sha256: string;
  rows: number;
  stats: PpoStats | null;
}

export function defaultReplayDir(config: Config, round: number): string {
  return join(config.workDir, "replay", config.policy.name, String(round).padStart(6, "0"));
}

export async function replayRound(opts: ReplayOptions): Promise<ReplayResult> {
  const { config, round } = opts;
  const original = roundDir(config.workDir, config.policy.name, round);
  const manifest = await readManifest(original);
  if (!manifest) throw new ReplayMismatchError(`round ${round} has no manifest under ${policyDir(config.workDir, config.policy.name)}`);
  const url = opts.url ?? config.nats.url ?? runningOwnServerUrl(config.workDir);
  if (!url) throw new ReplayMismatchError("replay needs a NATS server: set nats.url (or RLLOOP_NATS_URL), or run it while the daemon's own nats-server is up");
  const nats = await connectNats(config.nats, url);
  try {
    const items = await readRoundRollouts(nats.jsm, manifest.round, manifest.events, validateContext({ ...config, policy: { ...config.policy, name: manifest.policy } }));
    const text = trainJsonl(items, manifest.advantage);
    const digest = sha256(text);
    if (digest !== manifest.train_sha256) {
      throw new ReplayMismatchError(`round ${round}: rebuilt train.jsonl has sha256 ${digest}, the manifest records ${manifest.train_sha256}`);
    }
    const out = opts.out ?? defaultReplayDir(config, round);
    await mkdir(join(out, "frames"), { recursive: true });
    const limits: FrameLimits = { roots: new FrameRoots(config.frames.roots, config.frames.rootTimeoutS * 1000), maxBytes: config.frames.maxBytes, maxPixels: config.frames.maxPixels, objects: frameObjectOpener(nats.nc, config.frames.objectBucket) };
    await materialiseFrames(items, out, original, limits);
    await writeFileAtomic(join(out, TRAIN_FILE), text);
    await writeFileAtomic(join(out, "manifest.json"), `${JSON.stringify({ ...manifest, replayOf: original }, null, 2)}\n`);
    const stats = opts.train ? await retrain(opts, manifest, out) : null;
    return { out, sha256: digest, rows: manifest.rows, stats };
  } finally {
    await nats.nc.drain().catch(() => {});
  }
}

/** Frames from their sources; a source that is gone (a deleted file) falls back to the round folder's copy. */
async function materialiseFrames(items: RoundRollout[], out: string, original: string, limits: FrameLimits) {
  for (const { seq, rollout } of items) {
    for (let k = 0; k < rollout.steps.length; k++) {
      const name = frameFileName(seq, k);
      const dest = join(out, "frames", name);
      try {
        await writeFramePng(await frameBytes((rollout.steps[k] as RolloutStep).image, limits), dest, limits);
      } catch (err) {
        await copyFile(join(original, "frames", name), dest).catch(() => {
          throw new ReplayMismatchError(`frame ${name}: source unavailable (${(err as Error).message}) and no copy in ${original}`);
        });
      }
    }
  }
}

type RolloutStep = RoundRollout["rollout"]["steps"][number];

async function retrain(opts: ReplayOptions, manifest: Manifest, out: string): Promise<PpoStats> {
  if (!manifest.parent.path || !manifest.reference.path) throw new ReplayMismatchError(`round ${manifest.round}: manifest has no parent/reference adapter path`);
  await access(manifest.parent.path).catch(() => {
    throw new ReplayMismatchError(`round ${manifest.round}: its parent adapter ${manifest.parent.path} is not there (on the daemon's disk an adapter is kept for the last retention.rounds rounds, and while the state record names it)`);
  });
  const trainer = opts.trainer ?? new CliRoundTrainer(opts.config.trainer);
  const job = roundJob(opts.config.trainer, {
    dir: out, data: join(out, TRAIN_FILE), adapter: manifest.parent.path, ref: manifest.reference.path, out: join(out, "adapter"), seed: manifest.seed,
  });
  try {
    return await trainer.train(job, { label: `replay of round ${manifest.round}`, logFile: join(out, "trainer.log") });
  } finally {
    await trainer.close();
  }
}
