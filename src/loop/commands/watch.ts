// `rlloop watch`: a live terminal view of a running loop (phase, buffer, intake rate, pending acks, recent rounds
// with their PPO statistics, vLLM replicas). `--once` prints one frame and exits, for scripts.
import { Command } from "commander";
import { positiveInt } from "./options.js";

export interface WatchFlags {
  config?: string;
  nats?: string;
  policy?: string;
  once: boolean;
  rounds: number;
  timeout: number;
  refresh: number;
}

export function registerWatchCommand(program: Command): void {
  program.addCommand(
    new Command("watch")
      .description("live view of the loop: stats, recent rounds (pg_loss, kl, clip_frac, logp_gap, rows/s), replicas")
      .option("--config <file>", "config JSON: policy, NATS connection, observe.statsIntervalS (default: config/default.json)")
      .option("--nats <url>", "NATS server (default: config nats.url, else the daemon's own server)")
      .option("--policy <name>", "policy (default: config policy.name)")
      .option("--once", "print one frame from the daemon's status and rounds endpoints and exit", false)
      .option("--rounds <n>", "recent rounds shown", positiveInt("--rounds"), 12)
      .option("--timeout <ms>", "timeout of each request to the daemon's service", positiveInt("--timeout"), 2000)
      .option("--refresh <ms>", "redraw at least this often (ages and staleness tick)", positiveInt("--refresh"), 1000)
      .action(async (flags: WatchFlags) => {
        const { runWatch } = await import("../watch/run.js");
        await runWatch(flags);
      }),
  );
}
