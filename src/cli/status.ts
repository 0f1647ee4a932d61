// `rlloop status`: the running daemon's answer, or the committed state record when no daemon answers.
import { Command } from "commander";
import { examples, positiveNumber, renamed } from "./options.js";

export function statusCommand(): Command {
  const cmd = new Command("status")
    .description("ask the running daemon (micro service `rlloop`) for its status; falls back to the KV state record")
    .option("--config <file>", "config JSON (default: config/default.json)")
    .option("--timeout-s <s>", "how long to wait for NATS and for the daemon's answer", positiveNumber("--timeout-s"), 2)
    .action(async (opts: { config?: string; timeoutS: number }) => {
      const { loadConfig } = await import("../loop/config/index.js");
      const config = loadConfig(opts.config === undefined ? {} : { file: opts.config });
      const { queryStatus } = await import("../loop/status.js");
      process.stdout.write(`${JSON.stringify(await queryStatus(config, opts.timeoutS * 1000), null, 2)}\n`);
    });
  return examples(renamed(cmd, { "--timeout": "--timeout-s (seconds)" }), "rlloop status --config bt.json", "rlloop status --config bt.json --timeout-s 10");
}
