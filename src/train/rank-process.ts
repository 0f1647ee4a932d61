// Entry point of a rank process (started by resident.ts): loads the base model once, joins the process group,
// then runs the jobs it is sent over IPC one after another until told to stop. Logs go to stdout as pino JSON
// with the rank bound.
import { getOneMessage, sendMessage } from "execa";
import type { Logger } from "pino";
import { logger } from "../log.js";
import type { ProcessGroup } from "../native.js";
import { checkedJob, RANK_SPEC_ENV, type FromRank, type RankSpec, type ToRank } from "./rank-protocol.js";
import { loadModelWithAssets, runJob } from "./run-job.js";

const send = (message: FromRank) => sendMessage(message as never);
const errorOf = (err: unknown) => ({ name: (err as Error).name ?? "Error", message: (err as Error).message ?? String(err) });

/**
 * The parent (the daemon or `rlloop train`) is gone when the IPC channel closes: a rank in the middle of a job
 * would otherwise train on to its end (possibly hours) on GPUs a restarted daemon's new ranks are about to use.
 * Nothing it holds needs saving (a round's output counts only once the parent has it), so it ends at once.
 */
function exitWithParent(log: Logger): () => void {
  const onParentGone = () => {
    log.warn("parent process gone: exiting");
    process.kill(process.pid, "SIGKILL");
  };
  process.once("disconnect", onParentGone);
  // the listener keeps the IPC channel, and so the process, alive: removed when the rank ends normally
  return () => process.off("disconnect", onParentGone);
}

async function main(): Promise<void> {
  const spec = JSON.parse(process.env[RANK_SPEC_ENV] ?? "null") as RankSpec | null;
  if (spec === null) throw new Error(`${RANK_SPEC_ENV} is not set: rank processes are started by rlloop`);
  const log = logger("train", { rank: spec.rank });
  const parentWatch = exitWithParent(log);
  try {
    await serve(spec, log);
  } finally {
    parentWatch();
  }
}

async function serve(spec: RankSpec, log: Logger): Promise<void> {
  let group: ProcessGroup | null = null;
  let model, assets;
  try {
    ({ model, assets } = await loadModelWithAssets(spec.model));
    group = spec.world > 1 ? await joinGroup(spec) : null;
  } catch (err) {
    await send({ type: "failed", rank: spec.rank, error: errorOf(err) });
    return;
  }
  await send({ type: "ready", rank: spec.rank });
  const ctx = { rank: spec.rank, world: spec.world, group, log };
  for (;;) {
    const message = (await getOneMessage()) as ToRank;
    if (message.type === "stop") break;
    try {
      const result = await runJob(ctx, model, assets, checkedJob(message.job));
      await send({ type: "result", id: message.id, rank: spec.rank, ok: true, result });
    } catch (err) {
      log.error({ err }, "job failed");
      await send({ type: "result", id: message.id, rank: spec.rank, ok: false, error: errorOf(err) });
    }
  }
  await group?.close();
}

async function joinGroup(spec: RankSpec): Promise<ProcessGroup> {
  const { ProcessGroup } = await import("../native.js");
  return ProcessGroup.init({
    backend: spec.model.device === "cpu" ? "gloo" : "nccl",
    rank: spec.rank,
    worldSize: spec.world,
    masterAddr: spec.masterAddr,
    masterPort: spec.masterPort,
    device: spec.model.device,
  });
}

await main();
