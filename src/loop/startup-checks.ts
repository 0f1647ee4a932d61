// What the daemon checks before it pulls anything (docs/daemon.md "Start"): a misconfiguration found here stops the
// start with a ConfigError naming the setting, instead of the loop taking rollouts in and going degraded at round
// 1's training; and the state record of a policy's first start.
import { access, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import { sha256File } from "../files.js";
import { checkAdapterDir } from "../train/job-inputs.js";
import type { Config } from "./config/index.js";
import { groupSumsBytes } from "./live-outcomes.js";
import type { Nats } from "./connection.js";
import { diskRoom, trainingOutputBytes } from "./disk-room.js";
import { ConfigError, HostFaultError, NoDiskRoomError } from "./errors.js";
import type { FrameRoots } from "./frame-roots.js";
import type { Probe } from "./probe.js";
import type { StateRecord, VersionedState } from "./state.js";

/** The configured frame roots, model and adapters exist before anything connects (the state record may later name
 *  others). A frame root that does not answer (a hung mount) is the host's fault: the daemon starts, and that root's
 *  frames wait until it answers. */
export async function checkConfiguredFiles(config: Config, frameRoots: FrameRoots, log: Logger): Promise<void> {
  if (config.trainer.command === null && config.trainer.model === null) {
    throw new ConfigError("'trainer.model' must name the base model folder (a Hugging Face Qwen3.5 checkpoint), got null (or set 'trainer.command' to run a trainer of your own)");
  }
  for (const root of config.frames.roots) {
    const isDirectory = await frameRoots.isDirectory(root).catch((err: unknown) => {
      if (!(err instanceof HostFaultError)) throw err;
      log.warn({ err }, "a frames root does not answer; the daemon starts, and its frames wait until it does");
      return true;
    });
    if (!isDirectory) throw new ConfigError(`'frames.roots' names ${root}, which is not a directory: frames by {path} under it could not be read`);
  }
  const { initial, reference } = config.adapter;
  await checkAdapterDir(initial ?? "", "adapter.initial").catch((cause: Error) => {
    if (initial !== null) throw new ConfigError(cause.message, { cause });
  });
  if (reference !== null) await checkAdapterDir(reference, "adapter.reference").catch((cause: Error) => {
    throw new ConfigError(cause.message, { cause });
  });
}

/** The adapters the next round continues must be on this disk. */
export async function checkStateAdapters(record: StateRecord): Promise<void> {
  const what = record.round === 0 ? "adapter.initial" : `the adapter of committed round ${record.adapter.round} (state record)`;
  await checkAdapterDir(record.adapter.path, what).catch((cause: Error) => {
    throw new ConfigError(`${cause.message}: the next round continues it`, { cause });
  });
  await checkAdapterDir(record.reference.path, "the reference adapter (state record)").catch((cause: Error) => {
    throw new ConfigError(cause.message, { cause });
  });
}

/** The trainer trains one small job from the adapters the next round continues (trainer.probeAtStart). */
export async function probeAtStart(probe: Probe, record: StateRecord, workDir: string, log: Logger): Promise<void> {
  // a probe whose output cannot fit would fail for the disk, not the trainer: the start waits for room instead
  // (daemon.ts), and does not train a probe on each attempt meanwhile
  const bytes = await trainingOutputBytes(record.adapter.path);
  const before = await diskRoom(workDir, bytes);
  if (before !== null) throw new NoDiskRoomError(`the start's probe job cannot run: ${before}`);
  const result = await probe.run(record.adapter.path, record.reference.path);
  if (!result.ok) {
    const after = await diskRoom(workDir, bytes); // the disk filled while it ran
    if (after !== null) throw new NoDiskRoomError(`the start's probe job failed, and ${after} (${result.error})`);
    throw new ConfigError(`the trainer cannot train the probe job (${probe.dir}; trainer.probeAtStart): ${result.error}`);
  }
  log.info("probe job trained: the trainer works");
}

/** An inline frame must fit the server's max_payload; say so when frames.maxBytes allows more. */
/** The state record apart from the guard's group sums, at most: the outcomes of 32 adapters with their confidence
 *  sequences and pairs, the lineage with its objects, the recent adapters and unpublished rounds (tens of kB). */
const STATE_RECORD_REST_BYTES = 128 * 1024;

export function checkPayloadLimits(nats: Nats, config: Config, log: Logger): void {
  const maxPayload = nats.nc.info?.max_payload;
  if (maxPayload === undefined) return;
  const inline = Math.floor(((maxPayload - 64 * 1024) * 3) / 4);
  if (config.frames.maxBytes > inline) {
    log.warn({ maxPayload, framesMaxBytes: config.frames.maxBytes, inlineFrameBytes: inline },
      "frames.maxBytes is larger than an inline frame ({png_base64}) can be on this server: larger frames must come by {path} or {object}");
  }
  // the state record is one message: group sums it cannot hold would make every commit fail, retried for ever
  const sums = config.guard.rewardRange !== null && config.guard.pairByGroup ? groupSumsBytes(config.guard) : 0;
  if (sums + STATE_RECORD_REST_BYTES > maxPayload) {
    throw new ConfigError(`the server's max_payload (${maxPayload} bytes) cannot hold the state record: up to ${sums} bytes of the guard's group sums ('guard.maxGroups' ${config.guard.maxGroups}, 'guard.baselines' ${config.guard.baselines}) and ~${STATE_RECORD_REST_BYTES} bytes besides; lower them or raise max_payload`);
  }
  if (config.limits.maxPayloadBytes > maxPayload) {
    log.info({ maxPayload, limitsMaxPayloadBytes: config.limits.maxPayloadBytes }, "the server's max_payload is below limits.maxPayloadBytes: it is the limit in effect");
  }
}

/** The state record of a policy's first start: round 0 is adapter.initial, the reference defaults to it. */
export async function initialState(config: Config): Promise<VersionedState> {
  const initial = config.adapter.initial;
  if (initial === null) throw new ConfigError("'adapter.initial' must name the initial (SFT) adapter dir: round 1 continues it and it is the default reference, got null");
  const reference = config.adapter.reference ?? initial;
  const adapterSha = await optionalSha(initial);
  const record: StateRecord = {
    version: 2, policy: config.policy.name, round: 0, outcome: "initial",
    adapter: { round: 0, path: initial, sha256: adapterSha },
    reference: { path: reference, sha256: await optionalSha(reference) },
    last_seq: 0, ack_floor: 0, recent_adapters: [{ round: 0, sha256: adapterSha }], unpublished: [],
    outcomes: { range: null, adapters: [] }, lineage: [{ round: 0, parent: null, path: initial, sha256: adapterSha }], rollback: null,
    at: new Date().toISOString(),
  };
  return { record, revision: 0 };
}

async function optionalSha(adapterDir: string): Promise<string | null> {
  const file = join(adapterDir, "adapter_model.safetensors");
  try {
    await access(file);
  } catch {
    return null;
  }
  return sha256File(file);
}
