// Which adapter served a rollout, judged against the committed state (DESIGN.md data flow step 2): newer than the
// latest published adapter is unknown, older than offPolicy.maxStaleness rounds is stale, and a given sha256 must
// match the one the loop published for that round.
import { RolloutRejectedError } from "./errors.js";
import type { RolloutCompleted } from "../contract/index.js";
import type { StateRecord } from "./state.js";

export function checkAdapter(adapter: RolloutCompleted["adapter"], state: StateRecord, maxStaleness: number): void {
  const latest = state.adapter.round;
  if (adapter.round > latest) {
    throw new RolloutRejectedError("unknown_adapter", `'adapter.round' is ${adapter.round} but the latest published adapter is round ${latest}`);
  }
  const staleness = latest - adapter.round;
  if (staleness > maxStaleness) {
    throw new RolloutRejectedError("stale_adapter", `served by adapter round ${adapter.round}, ${staleness} rounds behind round ${latest} (offPolicy.maxStaleness ${maxStaleness})`);
  }
  if (adapter.sha256 === undefined) return;
  const known = state.recent_adapters.find((a) => a.round === adapter.round)?.sha256 ?? null;
  if (known !== null && known !== adapter.sha256) {
    throw new RolloutRejectedError("adapter_mismatch", `'adapter.sha256' ${adapter.sha256.slice(0, 12)}… differs from round ${adapter.round}'s published ${known.slice(0, 12)}…`);
  }
}
