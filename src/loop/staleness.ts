// Which adapter served a rollout, judged against the committed state (DESIGN.md data flow step 2). Staleness is
// counted in the order adapters were announced to be served (the state's recent_adapters: each published adapter,
// and a rollback's target again, issue 23), not in round numbers: a rollout's staleness is how many adapters were
// announced after its own was last announced. So after a rollback from r7 to r5, rollouts of r5 are fresh, those of
// r7 (served until the rollback: nothing is wrong with them) are 1 behind — usable off-policy data for the r5
// lineage, as any rollout of the adapter served before — and a round that committed without publishing an adapter
// (the record's `unpublished`) is unknown.
// A rollout is judged by the adapters announced before it reached the stream (each entry's `seq`, the stream's last
// sequence at its commit): its verdict is the same whenever it is judged — on arrival, redelivered after a restart,
// or after a fault of the host kept it waiting while rounds committed — so no restart or outage makes a good rollout
// stale. A given sha256 must match the one the loop published for that round.
import { RolloutRejectedError } from "./errors.js";
import type { RolloutCompleted } from "../contract/index.js";
import type { StateRecord } from "./state.js";

/** `seq`: the rollout's stream sequence. */
export function checkAdapter(adapter: RolloutCompleted["adapter"], state: StateRecord, maxStaleness: number, seq: number): void {
  // records written before the serving order was kept may list nothing: then the served adapter is all there is
  const announced = state.recent_adapters.length > 0 ? state.recent_adapters : [{ round: state.adapter.round, sha256: state.adapter.sha256 }];
  const newest = Math.max(...announced.map((a) => a.round));
  if (adapter.round > newest) {
    throw new RolloutRejectedError("unknown_adapter", `'adapter.round' is ${adapter.round} but the latest published adapter is round ${newest}`);
  }
  if (state.unpublished.includes(adapter.round)) {
    throw new RolloutRejectedError("unknown_adapter", `'adapter.round' is ${adapter.round}, a round that published no adapter`);
  }
  // the order as the rollout met it; its own adapter announced again since (a rollback to it) counts where it is now
  const before = announced.filter((a) => a.seq === undefined || a.seq < seq);
  const own = (list: typeof announced) => list.some((a) => a.round === adapter.round);
  const served = own(before) || !own(announced) ? before : announced;
  // reached the stream before every adapter the record's window holds was announced: those announced before it have
  // left the window, and how many came after its own can no longer be told — it is not rejected on a guess
  if (served.length === 0) return;
  let index = served.length - 1;
  while (index >= 0 && served[index]?.round !== adapter.round) index--;
  if (index < 0) {
    // published before every adapter the record's window holds (RECENT_ADAPTERS): those announced before the rollout
    // arrived came after its own, and at most one a round between it and the window's lowest round (left the window
    // before them, so announced before the rollout too). Counted as that many (the rounds' distance when every round
    // published, as before the window existed), so a large maxStaleness admits what it says it admits.
    const lowest = Math.min(...announced.map((a) => a.round));
    const staleness = served.length + Math.max(0, lowest - adapter.round - 1);
    if (staleness <= maxStaleness) return;
    throw new RolloutRejectedError("stale_adapter", `served by adapter round ${adapter.round}, older than every adapter served recently (${announced.map((a) => a.round).join(", ")}): ${staleness} adapters behind when it arrived (offPolicy.maxStaleness ${maxStaleness})`);
  }
  const staleness = served.length - 1 - index;
  if (staleness > maxStaleness) {
    const current = served[served.length - 1]?.round ?? state.adapter.round;
    throw new RolloutRejectedError("stale_adapter", `served by adapter round ${adapter.round}, ${staleness} adapters behind round ${current} (offPolicy.maxStaleness ${maxStaleness})`);
  }
  if (adapter.sha256 === undefined) return;
  const known = served[index]?.sha256 ?? null;
  if (known !== null && known !== adapter.sha256) {
    throw new RolloutRejectedError("adapter_mismatch", `'adapter.sha256' ${adapter.sha256.slice(0, 12)}… differs from round ${adapter.round}'s published ${known.slice(0, 12)}…`);
  }
}
