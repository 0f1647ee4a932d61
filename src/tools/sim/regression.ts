// How good the simulated robot is under each adapter (issue 23: simulated robots that regress). Skill — the
// sampler's probability of the right digit, hence the mean step reward — grows with the adapter's depth in its
// lineage (how many rounds of training it carries), and the simulation can make it worse on purpose: a scripted
// regression (every adapter descending from round `regressAt`, that one included, loses `regressBy`), or a gradual
// drift (from depth `driftFrom` on, each round loses `driftPerRound`). A rollback to an earlier adapter leaves the
// regressed branch behind: the next adapters descend from the target, so the robots do well again.
export interface SkillModel {
  /** skill of the initial adapter (round 0) */
  base: number;
  /** gain per round of training in the lineage */
  perRound: number;
  /** adapters descending from this round (and it) regress; null = none */
  regressAt: number | null;
  regressBy: number;
  /** from this depth on, each further round loses driftPerRound; null = no drift */
  driftFrom: number | null;
  driftPerRound: number;
}

/** The sampler's probability of the right digit under adapter `round`, in [0, 0.95]. `parentOf` gives its lineage;
 *  by default every round continues the one before it (no rollback). */
export function adapterSkill(model: SkillModel, round: number, parentOf: (round: number) => number | null = (r) => (r > 0 ? r - 1 : null)): number {
  let depth = 0;
  let regressed = false;
  for (let r: number | null = round; r !== null && r > 0; r = parentOf(r)) {
    depth++;
    if (r === model.regressAt) regressed = true;
  }
  if (round === model.regressAt) regressed = true;
  const drift = model.driftFrom === null ? 0 : Math.max(0, depth - model.driftFrom) * model.driftPerRound;
  return Math.min(0.95, Math.max(0, model.base + model.perRound * depth - (regressed ? model.regressBy : 0) - drift));
}
