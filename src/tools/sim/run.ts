// The body of `rlloop simulate`: configuration → options, connect, make sure the streams exist (the simulator may
// run before the daemon ever has), publish, report. Output is JSON lines: one per event, then a summary.
import { loadConfig } from "../../loop/config/index.js";
import { ensureStreams } from "../../loop/connection.js";
/** `rlloop simulate`'s options (src/cli/simulate.ts). */
export interface SimulateFlags {
  config?: string;
  nats?: string;
  policy?: string;
  count: number;
  groupSize: number;
  maxSteps: number;
  seed: number;
  rate?: number;
  frameRoot?: string;
  width: number;
  height: number;
  levels: number;
  adapterRound: number;
  adapterName?: string;
  skill: number;
  skillPerRound: number;
  regressAt?: number;
  regressBy: number;
  driftFrom?: number;
  driftPerRound: number;
  memoryBits: number;
  run?: string;
  start: number;
  bad: boolean;
  quiet: boolean;
}

import { connectForCommand } from "../connect.js";
import { adapterName } from "../../contract/index.js";
import { publishBadEvents, publishRollouts, type SimulateOptions } from "./publisher.js";

export async function runSimulate(flags: SimulateFlags, print: (line: string) => void): Promise<void> {
  const config = loadConfig(flags.config === undefined ? {} : { file: flags.config });
  const policy = flags.policy ?? config.policy.name;
  if (flags.levels < 2 || flags.levels > 10) throw new RangeError(`--levels must be in 2..10 (one digit token per dimension), got ${flags.levels}`);
  if (flags.maxSteps > config.policy.maxSteps) {
    throw new RangeError(`--max-steps ${flags.maxSteps} exceeds policy.maxSteps ${config.policy.maxSteps}: the daemon would reject those rollouts (--bad covers that case)`);
  }
  const opts: SimulateOptions = {
    policy,
    seed: flags.seed,
    groupSize: flags.groupSize,
    maxSteps: flags.maxSteps,
    codeLength: config.policy.codeLength,
    levels: flags.levels,
    frame: { width: flags.width, height: flags.height },
    adapter: { round: flags.adapterRound, name: flags.adapterName ?? adapterName(policy, flags.adapterRound) },
    skill: {
      base: flags.skill, perRound: flags.skillPerRound, regressAt: flags.regressAt ?? null, regressBy: flags.regressBy,
      driftFrom: flags.driftFrom ?? null, driftPerRound: flags.driftPerRound,
    },
    memoryBits: flags.memoryBits,
    runTag: flags.run ?? `sim-s${flags.seed}`,
    startMs: Date.now(),
    spacingMs: flags.rate ? 1000 / flags.rate : 0,
    count: flags.count,
    start: flags.start,
    rate: flags.rate ?? null,
    frameRoot: flags.frameRoot ?? null,
  };
  const nats = await connectForCommand(config, "rlloop-simulate", flags.nats);
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once("SIGINT", onSignal);
  try {
    await ensureStreams(nats.jsm, config.stream);
    if (flags.bad) {
      const cases = await publishBadEvents(nats.js, opts, { codeLength: config.policy.codeLength, maxSteps: config.policy.maxSteps, maxPixels: config.frames.maxPixels });
      for (const c of cases) print(JSON.stringify(c));
      print(JSON.stringify({ summary: "bad", policy, published: cases.filter((c) => !c.duplicate).length, duplicates: cases.filter((c) => c.duplicate).length }));
      return;
    }
    const summary = await publishRollouts(nats.js, opts, {
      signal: stop.signal,
      onPublished: flags.quiet ? undefined : (r) => print(JSON.stringify(r)),
    });
    print(JSON.stringify({ summary: "rollouts", policy, ...summary }));
  } finally {
    process.off("SIGINT", onSignal);
    await nats.nc.drain().catch(() => {});
  }
}
