// Round folder assembly (DESIGN.md data flow step 4): move the round's frames from incoming/ into frames/, compute
// advantages, write train.jsonl in the seed's row format and the manifest. `trainJsonl` is a pure function of
// the rollouts (sorted by stream sequence) and the advantage config, so replay reproduces it byte for byte.
import { access, mkdir, readdir, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { advantages, type Episode } from "./advantages.js";
import type { AdvantageConfig } from "./config/index.js";
import { sha256, writeFileAtomic } from "../files.js";
import { writeManifest, type Manifest } from "./manifest.js";
import { withoutInlineFrames } from "./frames.js";
import { frameFileName, frameRowPath } from "./paths.js";
import type { RolloutCompleted, RoundTrigger } from "../contract/index.js";

export const TRAIN_FILE = "train.jsonl";
/**
 * The round's rollouts as admitted, frames excepted, a JSON object ({seq, rollout}) a line: what a resumed round
 * reads for its outcomes and its poison isolation, whatever has left the stream since (stream.maxAgeS).
 */
export const ROLLOUTS_FILE = "rollouts.jsonl";

export interface RoundRollout {
  seq: number;
  rollout: RolloutCompleted;
}

/** One training row: the seed's format (image path relative to the round folder). */
export interface TrainRow {
  image: string;
  name: string;
  code: string;
  adv: number;
  vllm_logp: number;
  memory?: [string, string];
}

export function trainRows(items: readonly RoundRollout[], config: AdvantageConfig): TrainRow[] {
  const sorted = [...items].sort((a, b) => a.seq - b.seq);
  const episodes: Episode[] = sorted.map(({ rollout }) => ({
    group: rollout.group,
    reward: rollout.reward,
    stepRewards: rollout.steps.map((s) => s.reward),
  }));
  const adv = advantages(episodes, config);
  return sorted.flatMap(({ seq, rollout }, i) => rollout.steps.map((step, k) => {
    const value = adv[i]?.[k] as number;
    // limits.reward bounds every reward (|r| <= 1e15), so no estimator can overflow float32; this guards the invariant
    if (!Number.isFinite(value)) throw new RangeError(`advantage of rollout seq ${seq} step ${k} is ${value}: rewards outside limits.reward reached the round`);
    const row: TrainRow = { image: frameRowPath(seq, k), name: step.name, code: step.code, adv: value, vllm_logp: step.vllm_logp };
    if (step.memory) row.memory = [step.memory[0], step.memory[1]];
    return row;
  }));
}

export function trainJsonl(items: readonly RoundRollout[], config: AdvantageConfig): string {
  return trainRows(items, config).map((row) => `${jsonLine(row)}\n`).join("");
}

/** JSON on one line for every reader: JSON.stringify escapes C0 controls but leaves U+0085, U+2028 and U+2029 raw,
 *  and Python's str.splitlines (the seed reads train.jsonl so) ends a line at each — a valid step name holding one
 *  would break its row, and its rollout would be taken for poison. */
function jsonLine(value: unknown): string {
  return JSON.stringify(value).replace(/[\u0085\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

export interface AssembleInput {
  round: number;
  policy: string;
  dir: string;
  incoming: string;
  items: readonly RoundRollout[];
  trigger: RoundTrigger;
  advantage: AdvantageConfig;
  parent: Manifest["parent"];
  reference: Manifest["reference"];
  configHash: string;
  seed: number;
  /** called after train.jsonl is written, before the manifest (test pause point) */
  beforeManifest?: () => Promise<void>;
}

/**
 * Frames must be in incoming/ (intake wrote them), or in the folder's frames/ already: an assembly that failed part
 * way (a full disk) is done again in the same folder, and the frames it moved are the round's. The rest of the
 * folder is rebuilt from scratch.
 */
export async function assembleRound(input: AssembleInput): Promise<Manifest> {
  const frames = join(input.dir, "frames");
  const names = input.items.flatMap(({ seq, rollout }) => rollout.steps.map((_, k) => frameFileName(seq, k)));
  await clearFolder(input.dir, frames, new Set(names));
  await mkdir(frames, { recursive: true });
  for (const name of names) await moveFrame(join(input.incoming, name), join(frames, name));
  const text = trainJsonl(input.items, input.advantage);
  await writeFileAtomic(join(input.dir, TRAIN_FILE), text);
  await writeFileAtomic(join(input.dir, ROLLOUTS_FILE), input.items.map(({ seq, rollout }) => `${JSON.stringify({ seq, rollout: withoutInlineFrames(rollout) })}\n`).join(""));
  await input.beforeManifest?.();
  const now = new Date().toISOString();
  const manifest: Manifest = {
    version: 2,
    round: input.round,
    policy: input.policy,
    status: "assembled",
    parent: input.parent,
    reference: input.reference,
    events: [...input.items].sort((a, b) => a.seq - b.seq).map(({ seq, rollout }) => ({ seq, id: rollout.id, rows: rollout.steps.length })),
    poisoned: [],
    rows: input.items.reduce((n, { rollout }) => n + rollout.steps.length, 0),
    trigger: input.trigger,
    advantage: { ...input.advantage },
    config_hash: input.configHash,
    train_sha256: sha256(text),
    seed: input.seed,
    attempts: 0,
    created_at: now,
    updated_at: now,
  };
  await writeManifest(input.dir, manifest);
  return manifest;
}

/** Empties `dir` but the frames in `frames` named in `keep`. */
async function clearFolder(dir: string, frames: string, keep: ReadonlySet<string>): Promise<void> {
  const entries = await entriesOf(dir);
  await Promise.all(entries.filter((n) => join(dir, n) !== frames).map((n) => rm(join(dir, n), { recursive: true, force: true })));
  const kept = await entriesOf(frames);
  await Promise.all(kept.filter((n) => !keep.has(n)).map((n) => rm(join(frames, n), { force: true })));
}

async function entriesOf(dir: string): Promise<string[]> {
  return readdir(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return [];
    throw err;
  });
}

/** Renames a frame into the round; one already there (moved by an earlier try of this assembly) stays. */
async function moveFrame(from: string, to: string): Promise<void> {
  try {
    await rename(from, to);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    await access(to).catch(() => {
      throw err; // in neither place: the rename's own error says which frame is missing
    });
  }
}
