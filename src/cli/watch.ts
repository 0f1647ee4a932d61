// `rlloop watch`: a live terminal view of a running loop (phase, health, buffer, intake rate, pending acks, recent
// rounds with their PPO statistics, vLLM replicas). `--once` prints one frame and exits, for scripts.
import { Command } from "commander";
import type { WatchFlags } from "../tools/watch/run.js";
import { examples, positiveInt, positiveNumber, renamed, withConnection } from "./options.js";

export function watchCommand(): Command {
  const cmd = withConnection(new Command("watch")
    .description("live view of the loop: stats, recent rounds (pg_loss, kl, clip_frac, logp_gap, rows/s), replicas"), "policy, NATS connection, observe.statsIntervalS")
    .option("--once", "print one frame from the daemon's status and rounds endpoints and exit", false)
    .option("--rounds <n>", "recent rounds shown", positiveInt("--rounds"), 12)
    .option("--timeout-s <s>", "timeout of each request to the daemon's service", positiveNumber("--timeout-s"), 2)
    .option("--refresh-s <s>", "redraw at least this often (ages and staleness tick)", positiveNumber("--refresh-s"), 1)
    .action(async (flags: WatchFlags) => {
      const { runWatch } = await import("../tools/watch/run.js");
      await runWatch(flags);
    });
  renamed(cmd, { "--timeout": "--timeout-s (seconds)", "--refresh": "--refresh-s (seconds)" });
  return examples(cmd, "rlloop watch --config bt.json", "rlloop watch --nats nats://127.0.0.1:4222 --policy bt --once");
}
