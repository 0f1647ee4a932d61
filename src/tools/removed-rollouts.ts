// How the monitors (`rlloop watch`, `rlloop ui`) sum up a round.isolated event: the rollouts taken out of the round,
// by reason (poison, logp_mismatch).
import type { RoundEvent } from "../contract/index.js";

type Isolated = Extract<RoundEvent, { type: "round.isolated" }>;

/** "2 rollout(s) rejected: poison 1, logp_mismatch 1" */
export function removedRollouts(event: Pick<Isolated, "poisoned">): string {
  const counts = new Map<string, number>();
  for (const p of event.poisoned) counts.set(p.reason, (counts.get(p.reason) ?? 0) + 1);
  return `${event.poisoned.length} rollout(s) rejected: ${[...counts].map(([reason, n]) => `${reason} ${n}`).join(", ")}`;
}
