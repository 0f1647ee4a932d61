// The rollouts of a round's events, read back from RLLOOP_ROLLOUTS by stream sequence and validated again: what
// replay rebuilds a round from, and what a round's train.jsonl is rebuilt from after poison rollouts are removed.
import type { JetStreamManager } from "@nats-io/jetstream";
import { ROLLOUT_STREAM } from "../contract/index.js";
import type { RoundRollout } from "./assemble.js";
import { ReplayMismatchError } from "./errors.js";
import { parseRollout, type ValidateContext } from "./validate.js";

export async function readRoundRollouts(jsm: JetStreamManager, round: number, events: ReadonlyArray<{ seq: number; id: string }>, vctx: ValidateContext): Promise<RoundRollout[]> {
  const items: RoundRollout[] = [];
  for (const e of events) {
    const msg = await jsm.streams.getMessage(ROLLOUT_STREAM, { seq: e.seq });
    if (!msg) throw new ReplayMismatchError(`round ${round}: stream sequence ${e.seq} (rollout ${e.id}) is no longer in ${ROLLOUT_STREAM} (stream.maxAgeS?)`);
    const rollout = parseRollout(msg.data, vctx);
    if (rollout.id !== e.id) throw new ReplayMismatchError(`round ${round}: sequence ${e.seq} holds rollout ${rollout.id}, the manifest records ${e.id}`);
    items.push({ seq: e.seq, rollout });
  }
  return items;
}
