// The statistics of the adapter a record serves, for its announcement when a kill cut it short or the events stream's
// age limit took it away (the next start publishes it: daemon.ts): the adapter's stats.json, else the round's manifest. A read the disk fails (EIO, a full
// disk's stale handle) is the host's fault: it throws that error, so the caller retries it rather than ending.
import type { PpoStats } from "../contract/index.js";
import { isDiskFault } from "./errors.js";
import { readManifest } from "./manifest.js";
import { roundDir } from "./paths.js";
import type { StateRecord } from "./state.js";
import { readTrainerOutput } from "./trainer.js";

export async function committedStats(record: StateRecord, workDir: string): Promise<PpoStats> {
  let fromAdapter: unknown;
  try {
    return await readTrainerOutput(record.adapter.path);
  } catch (err) {
    fromAdapter = err;
  }
  const manifest = await readManifest(roundDir(workDir, record.policy, record.adapter.round));
  if (manifest?.stats) return manifest.stats;
  const diskFault = causes(fromAdapter).find(isDiskFault);
  if (diskFault !== undefined) throw diskFault; // the adapter is there but the disk failed its read: read again later
  throw new Error(`round ${record.adapter.round}: its adapter is served, but neither the adapter nor its round's manifest has its statistics`, { cause: fromAdapter });
}

/** An error and its causes, outermost first (a read's errno error may sit under a TrainerError and an
 *  AdapterFileError). */
function causes(err: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let cur = err; cur !== undefined && cur !== null && chain.length < 8; cur = (cur as { cause?: unknown }).cause) chain.push(cur);
  return chain;
}
