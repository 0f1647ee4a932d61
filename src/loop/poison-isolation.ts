// Isolating the rollouts a round fails on (docs/daemon.md "Faults"): the round's rows are split by rollout and the
// halves trained, recursively, until every failing part is one rollout — adaptive group testing, about
// 2·k·log2(n) + k part trainings for k culprits among n rollouts, each on the exact rows of the failed round. A part
// that fails is only blamed on its rows when the probe still trains right after it (after a part that failed with an
// error, the work directory's disk must have room for a training's output too: disk-room.ts); otherwise the trainer
// or its host is at fault and the search stops (TrainerFaultError) without blaming anyone. A single rollout is blamed
// only when it fails twice on its own.
import { readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Manifest, RemovedFromRound } from "../contract/index.js";
import { writeFileAtomic } from "../files.js";
import type { ProbeResult } from "./probe.js";

/** A rollout taken out of its round: rejected with `reason`, its rows not trained. */
export interface Culprit {
  seq: number;
  id: string;
  rows: number;
  error: string;
  reason: RemovedFromRound;
}

export interface PartTrainer {
  /** trains the rows file `data` (inside the round folder) as a part of the round; resolves null or the error */
  part(data: string, label: string): Promise<string | null>;
  probe(): Promise<ProbeResult>;
}

/** The trainer or its host failed while isolating: nothing may be blamed on the rows. */
export class TrainerFaultError extends Error {
  override name = "TrainerFaultError";
}

type Member = { event: Manifest["events"][number]; lines: string[] };

/** The rollouts of `manifest` whose rows fail training on their own; `firstError` is the whole round's failure. */
export async function isolatePoison(manifest: Manifest, dir: string, trainer: PartTrainer, firstError: string): Promise<Culprit[]> {
  const members = await membersOf(manifest, dir);
  const culprits: Culprit[] = [];
  let parts = 0;
  const fails = async (part: Member[]): Promise<string | null> => {
    const data = join(dir, `isolate-${++parts}.jsonl`);
    await writeFileAtomic(data, part.flatMap((m) => m.lines).map((l) => `${l}\n`).join(""));
    try {
      const error = await trainer.part(data, `round ${manifest.round} part ${parts} (${part.length} rollouts)`);
      if (error === null) return null;
      const probe = await trainer.probe();
      if (!probe.ok) throw new TrainerFaultError(`the probe failed while isolating round ${manifest.round}: ${probe.error}`);
      return error;
    } finally {
      await rm(data, { force: true });
    }
  };
  const search = async (part: Member[], error: string): Promise<void> => {
    if (part.length === 1) {
      // blamed only when it fails again on its own: a failure that does not repeat (the host's, once: a GPU that hung
      // past trainer.timeoutS, a rank killed from outside) is not the rollout's
      const again = await fails(part);
      if (again === null) return;
      const { event } = part[0] as Member;
      culprits.push({ seq: event.seq, id: event.id, rows: event.rows, error: errorSummary(again), reason: "poison" });
      return;
    }
    const half = Math.ceil(part.length / 2);
    for (const piece of [part.slice(0, half), part.slice(half)]) {
      const pieceError = await fails(piece);
      if (pieceError !== null) await search(piece, pieceError);
    }
  };
  await search(members, firstError);
  return culprits;
}

/** train.jsonl's lines by rollout: rows are written in stream order, each rollout's steps in a row. */
async function membersOf(manifest: Manifest, dir: string): Promise<Member[]> {
  const lines = (await readFile(join(dir, "train.jsonl"), "utf8")).split("\n").filter((l) => l.length > 0);
  const members: Member[] = [];
  let at = 0;
  for (const event of manifest.events) {
    members.push({ event, lines: lines.slice(at, at + event.rows) });
    at += event.rows;
  }
  if (at !== lines.length) throw new Error(`round ${manifest.round}: train.jsonl has ${lines.length} rows, its manifest's events ${at}`);
  return members;
}

/** A trainer error in one line: its first line and, when the trainer's output follows, that output's last line. */
export function errorSummary(text: string): string {
  const lines = text.split("\n").map((l) => l.trim()).filter((l) => l.length > 0);
  const first = lines[0] ?? text;
  const last = lines.length > 1 ? lines[lines.length - 1] : undefined;
  return (last === undefined ? first : `${first} … ${last}`).slice(0, 500);
}
