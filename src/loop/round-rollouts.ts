// The rollouts of a round's events, read back from RLLOOP_ROLLOUTS by stream sequence: what replay rebuilds a round
// from (judged again, by the config replay runs with: `vctx`), and what the daemon reads of a round it admitted them
// to (its outcomes; train.jsonl rebuilt after poison rollouts are removed) — the contract's schema only (`"admitted"`)
// — where the round folder did not keep them (ROLLOUTS_FILE: a folder assembled before it was written).
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { JetStreamManager } from "@nats-io/jetstream";
import { ROLLOUT_STREAM } from "../contract/index.js";
import { ROLLOUTS_FILE, type RoundRollout } from "./assemble.js";
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

/**
 * The daemon's read of a round it admitted: the rollouts its folder kept, the stream for any it did not. Read from
 * the stream alone, a message gone from it (stream.maxAgeS lowered between restarts, a trainer fault longer than it)
 * would make a resumed round an error at every start.
 */
export async function admittedRoundRollouts(jsm: JetStreamManager, dir: string, round: number, events: ReadonlyArray<{ seq: number; id: string }>): Promise<RoundRollout[]> {
  const kept = await keptRollouts(dir);
  const fromStream = events.filter((e) => kept.get(e.seq)?.rollout.id !== e.id);
  const read = fromStream.length === 0 ? [] : await readRoundRollouts(jsm, round, fromStream, "admitted");
  const bySeq = new Map(read.map((item) => [item.seq, item]));
  return events.map((e) => bySeq.get(e.seq) ?? (kept.get(e.seq) as RoundRollout));
}

/** ROLLOUTS_FILE of a round folder, by sequence (the daemon's own file, written atomically: not judged again, since
 *  the schema's transform would move its `meta` one level down); empty when there is none. */
async function keptRollouts(dir: string): Promise<Map<number, RoundRollout>> {
  const text = await readFile(join(dir, ROLLOUTS_FILE), "utf8").catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return "";
    throw err;
  });
  try {
    const items = text.split("\n").filter((line) => line.length > 0).map((line) => JSON.parse(line) as RoundRollout);
    return new Map(items.map((item) => [item.seq, item]));
  } catch {
    return new Map(); // a damaged file: the stream has them, or says which is gone
  }
}
