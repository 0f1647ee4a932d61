// manifest.json of a round folder (DESIGN.md data flow step 4): what the round consumed and from what it trains.
// Written atomically; its `status` moves assembled → training → committed. A manifest that exists but is not
// committed is the round a restart re-runs; its `events` are the exact (stream sequence, rollout id) pairs.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { writeFileAtomic } from "../files.js";
import { PpoStats, statsReplacer } from "./schema.js";

export const MANIFEST_FILE = "manifest.json";

export const ManifestStatus = {
  assembled: "train.jsonl and frames written; not trained",
  training: "handed to the trainer (attempt counts in `attempts`)",
  committed: "state record moved to this round; see `outcome`",
} as const;
export type ManifestStatus = keyof typeof ManifestStatus;

const AdapterPointer = z.object({ round: z.number().int(), path: z.string().nullable(), sha256: z.string().nullable() });

export const Manifest = z.object({
  version: z.literal(1),
  round: z.number().int().min(1),
  policy: z.string(),
  status: z.enum(["assembled", "training", "committed"]),
  parent: AdapterPointer,
  reference: z.object({ path: z.string().nullable(), sha256: z.string().nullable() }),
  events: z.array(z.object({ seq: z.number().int(), id: z.string(), rows: z.number().int() })),
  rows: z.number().int(),
  trigger: z.enum(["rows", "groups", "max_wait"]),
  advantage: z.object({ estimator: z.enum(["grpo", "rloo", "return"]), eps: z.number(), gamma: z.number() }),
  configHash: z.string(),
  trainSha256: z.string(),
  seed: z.number().int(),
  attempts: z.number().int().default(0),
  outcome: z.enum(["published", "rejected", "failed"]).optional(),
  reason: z.string().optional(),
  stats: PpoStats.optional(),
  createdAt: z.string(),
  updatedAt: z.string(),
});
export type Manifest = z.infer<typeof Manifest>;

export async function readManifest(dir: string): Promise<Manifest | null> {
  let text: string;
  try {
    text = await readFile(join(dir, MANIFEST_FILE), "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
  return Manifest.parse(JSON.parse(text));
}

export async function writeManifest(dir: string, manifest: Manifest): Promise<void> {
  await writeFileAtomic(join(dir, MANIFEST_FILE), `${JSON.stringify(manifest, statsReplacer, 2)}\n`);
}

/** A new manifest object with `patch` applied and updatedAt set; the input is not modified. */
export function updated(manifest: Manifest, patch: Partial<Manifest>): Manifest {
  return { ...manifest, ...patch, updatedAt: new Date().toISOString() };
}
