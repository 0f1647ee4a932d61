// `rlloop ui`: the web dashboard of a running loop, served on loopback by default. A monitor: it reads NATS only
// (src/tools/ui/run.ts), so it runs wherever `rlloop watch` runs.
import { Command } from "commander";
import { DEFAULT_UI_PORT, type UiFlags } from "../tools/ui/run.js";
import { examples, nonNegativeInt, port, positiveNumber, renamed, withConnection } from "./options.js";

export function uiCommand(): Command {
  const cmd = withConnection(new Command("ui")
    .description("web dashboard of a running loop: phase, health, buffer, per-round plots, rewards by adapter, rejections, adapters and replicas, live"),
  "policy, NATS connection, round.rows, observe.statsIntervalS")
    .option("--host <host>", "address to listen on; anything but loopback exposes the page to the network", "127.0.0.1")
    .option("--port <n>", "port to listen on, 0 = any free one", port("--port"), DEFAULT_UI_PORT)
    .option("--token <token>", "require this token (open the page as /?token=…); prefer RLLOOP_UI_TOKEN, which ps does not show (default: none)")
    .option("--reward-history <n>", "newest rollouts read back for the reward plot; each is read whole, frames included", nonNegativeInt("--reward-history"), 5000)
    .option("--timeout-s <s>", "timeout of each request to the daemon's service", positiveNumber("--timeout-s"), 2)
    .action(async (flags: UiFlags) => {
      const { runUi } = await import("../tools/ui/run.js");
      await runUi(flags);
    });
  renamed(cmd, { "--timeout": "--timeout-s (seconds)" });
  return examples(cmd, "rlloop ui --config bt.json", "RLLOOP_UI_TOKEN=$(openssl rand -hex 16) rlloop ui --config bt.json --host 0.0.0.0");
}
