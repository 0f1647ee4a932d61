// Where the daemon keeps things under config.workDir:
//   rounds/<policy>/<round:06d>/   train.jsonl, frames/, manifest.json, adapter/ (adapter.tmp/ while training)
//   rounds/<policy>/incoming/      frames materialised at intake, moved into a round folder when it closes
//   nats/                          the store (and server.json) of the daemon's own nats-server, when it runs one
import { join } from "node:path";

export const policyDir = (workDir: string, policy: string) => join(workDir, "rounds", policy);
export const roundDir = (workDir: string, policy: string, round: number) => join(policyDir(workDir, policy), String(round).padStart(6, "0"));
export const incomingDir = (workDir: string, policy: string) => join(policyDir(workDir, policy), "incoming");
export const natsDir = (workDir: string) => join(workDir, "nats");

/** Round folder names are 6-digit numbers; anything else under rounds/<policy>/ is not a round. */
export const ROUND_DIR_NAME = /^\d{6,}$/;

/** A frame's file name: stream sequence and step index make it unique and deterministic (replay rebuilds it). */
export const frameFileName = (seq: number, step: number) => `${seq}-${step}.png`;
/** The frame path written into train.jsonl: relative to the round folder, where the trainer runs. */
export const frameRowPath = (seq: number, step: number) => `frames/${frameFileName(seq, step)}`;
