// Teacher-forced argmax accuracy of the code digits on validation rows (the seed's accuracy()): each rank scores
// rows[rank::world] in batches, counts are summed over ranks.
import type { Model } from "../native.js";
import { batches, strided } from "./batching.js";
import type { Collator } from "./collate.js";
import { preparedBatches } from "./loader.js";
import { sumOverRanks, type RankContext } from "./rank-context.js";
import type { SftRow } from "./rows.js";
import { accuracyOf, countCorrect, type Accuracy, type AccuracyCounts } from "./stats.js";

export async function validationAccuracy(
  ctx: RankContext,
  model: Model,
  collator: Collator,
  rows: SftRow[],
  source: string,
  adapter: string,
  batch: number,
  onFirstReady?: () => void, // once the pass's first batch is prepared: a caller's time to start preparing its own
): Promise<Accuracy> {
  const mine = strided(rows.map((_, i) => i), ctx.rank, ctx.world);
  let counts: AccuracyCounts = { digits: 0, codes: 0, rows: 0 };
  const pass = preparedBatches(model, collator, rows, batches(mine, batch), source);
  if (onFirstReady) void pass.firstReady.then(onFirstReady);
  for await (const b of pass) {
    const { correct, K } = await model.logprobs(b.batch, { adapter });
    counts = countCorrect(counts, correct, K);
  }
  const summed = await sumOverRanks(ctx, Float32Array.of(counts.digits, counts.codes, counts.rows));
  return accuracyOf({ digits: summed[0]!, codes: summed[1]!, rows: summed[2]! }, rows[0]!.code.length);
}
