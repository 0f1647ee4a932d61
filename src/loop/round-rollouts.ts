// The rollouts of a round's events, read back from RLLOOP_ROLLOUTS by stream sequence: what replay rebuilds a round
// from (judged again, by the config replay runs with: `vctx`), and what the daemon reads of a round it admitted them
// to (its outcomes; train.jsonl rebuilt after poison rollouts are removed) — the contract's schema only (`"admitted"`).
import type { JetStreamManager } from "@nats-io/jetstream";
import { ROLLOUT_STREAM } from "../contract/index.js";
import type { RoundRollout } from "./assemble.js";
import { ReplayMismatchError } from "./errors.js";
import { withoutInlineFrames } from "./frames.js";
import { parseAdmittedRollout, parseRollout, type ValidateContext } from "./validate.js";

export async function readRoundRollouts(jsm: JetStreamManager, round: number, events: ReadonlyArray<{ seq: number; id: string }>, vctx: ValidateContext | "admitted"): Promise<RoundRollout[]> {
  const items: RoundRollout[] = [];
  for (const e of events) {
    const msg = await jsm.streams.getMessage(ROLLOUT_STREAM, { seq: e.seq });
    if (!msg) throw new ReplayMismatchError(`round ${round}: stream sequence ${e.seq} (rollout ${e.id}) is no longer in ${ROLLOUT_STREAM} (stream.maxAgeS?)`);
    const rollout = vctx === "admitted" ? parseAdmittedRollout(msg.data) : parseRollout(msg.data, vctx);
    if (rollout.id !== e.id) throw new ReplayMismatchError(`round ${round}: sequence ${e.seq} holds rollout ${rollout.id}, the manifest records ${e.id}`);
    // the daemon's own rounds hold no frame bytes (their frames are on disk), as when it admitted them
    items.push({ seq: e.seq, rollout: vctx === "admitted" ? withoutInlineFrames(rollout) : rollout });
  }
  return items;
}
