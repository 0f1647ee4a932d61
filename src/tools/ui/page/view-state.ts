// The page's copy of the view model: a snapshot, then patches applied in revision order (rows replace rows with
// the same key). Pure: no DOM, so it is tested without a browser.
import { KEPT_REJECTIONS, KEPT_ROUNDS, type UiPatch, type UiSnapshot } from "../model.js";

export function applyPatch(view: UiSnapshot, patch: UiPatch): UiSnapshot {
  // a patch the snapshot already contains (sent before the snapshot was taken) changes nothing
  if (patch.revision <= view.revision) return view;
  const rounds = patch.rounds ? upsert(view.rounds, patch.rounds, (r) => r.round).slice(-KEPT_ROUNDS) : view.rounds;
  // a page left open for weeks keeps what the monitor keeps
  const oldest = rounds.length >= KEPT_ROUNDS ? (rounds[0]?.round ?? 0) : 0;
  return {
    ...view,
    revision: patch.revision,
    caughtUp: patch.caughtUp ?? view.caughtUp,
    live: patch.live ?? view.live,
    rounds,
    rewards: (patch.rewards ? upsert(view.rewards, patch.rewards, (r) => r.adapterRound) : view.rewards).filter((r) => r.adapterRound >= oldest),
    reasons: patch.reasons ? upsert(view.reasons, patch.reasons, (r) => r.reason).sort((a, b) => b.count - a.count || a.reason.localeCompare(b.reason)) : view.reasons,
    rejections: patch.rejections ? [...view.rejections, ...patch.rejections].slice(-KEPT_REJECTIONS) : view.rejections,
    adapters: (patch.adapters ? upsert(view.adapters, patch.adapters, (a) => a.round) : view.adapters).filter((a) => a.round >= oldest),
    replicas: patch.replicas ? upsert(view.replicas, patch.replicas, (r) => r.replica) : view.replicas,
    rollbacks: patch.rollbacks ? upsert(view.rollbacks, patch.rollbacks, (r) => r.seq) : view.rollbacks,
  };
}

/** Replaces rows by key and keeps the list in ascending key order. Appending at the end (a new round) is the
 *  common case and costs no sort. */
function upsert<T, K extends number | string>(rows: T[], changed: T[], key: (row: T) => K): T[] {
  const byKey = new Map<K, number>();
  rows.forEach((row, i) => byKey.set(key(row), i));
  const out = rows.slice();
  let sorted = true;
  for (const row of changed) {
    const at = byKey.get(key(row));
    if (at !== undefined) out[at] = row;
    else {
      const last = out.at(-1);
      if (last !== undefined && key(last) > key(row)) sorted = false;
      byKey.set(key(row), out.length);
      out.push(row);
    }
  }
  if (!sorted) out.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
  return out;
}
