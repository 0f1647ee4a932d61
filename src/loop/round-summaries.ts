// The service's `rounds` answer: the newest rounds of the work dir, newest first, each from its manifest, with the
// live outcomes of the adapter it published where the state record has them.
import type { RoundSummary } from "../contract/index.js";
import type { Config } from "./config/index.js";
import type { LoopContext } from "./context.js";
import { readManifest } from "./manifest.js";
import { roundDir } from "./paths.js";
import { roundNumbers } from "./recovery.js";
import { outcomeSummaries } from "./stats.js";

export async function roundSummaries(config: Config, ctx: LoopContext | null, limit: number): Promise<RoundSummary[]> {
  const policy = config.policy.name;
  const numbers = (await roundNumbers(config.workDir, policy)).slice(-limit).reverse();
  const outcomes = new Map(ctx ? outcomeSummaries(ctx).map((o) => [o.round, o]) : []);
  const out: RoundSummary[] = [];
  for (const round of numbers) {
    const manifest = await readManifest(roundDir(config.workDir, policy, round)).catch(() => null);
    if (!manifest) continue;
    out.push({
      round, status: manifest.outcome ? `${manifest.status}:${manifest.outcome}` : manifest.status,
      rows: manifest.rows, rollouts: manifest.events.length, sha256: manifest.train_sha256, stats: manifest.stats ?? null,
      outcomes: outcomes.get(round) ?? null,
    });
  }
  return out;
}
