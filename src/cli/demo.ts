// `rlloop demo`: the loop end to end at toy size on the CPU (src/loop/demo.ts says what runs).
import { join } from "node:path";
import { Command } from "commander";
import type { DemoCommandOptions } from "../tools/demo/command.js";
import { examples, nonNegativeInt, port, positiveInt, positiveNumber, renamed } from "./options.js";

type DemoFlags = Omit<DemoCommandOptions, "uiWorkDir">;

export function demoCommand(): Command {
  const cmd = new Command("demo")
    .description("run the whole loop on CPU: embedded nats-server, tiny random Qwen3.5, simulated rollouts, PPO rounds, published adapters")
    .option("--rounds <n>", "PPO rounds to run", positiveInt("--rounds"), 3)
    .option("--rows <n>", "decision rows per round", positiveInt("--rows"), 16)
    .option("--work <dir>", "work folder: model (kept), rounds and nats store (started afresh each run), demo.log", "runs/demo")
    .option("--seed <n>", "simulation and trainer seed", nonNegativeInt("--seed"), 0)
    .option("--round-timeout-s <s>", "give up on a round after this long", positiveNumber("--round-timeout-s"), 900)
    .option("--ui", "serve the web dashboard of the loop on loopback while it runs, and its final state afterwards until Ctrl-C", false)
    .option("--ui-port <n>", "the dashboard's port", port("--ui-port"), 9465)
    .action(async (opts: DemoFlags) => {
      const { runDemoCommand } = await import("../tools/demo/command.js");
      await runDemoCommand({ ...opts, uiWorkDir: join(opts.work, "loop") });
    });
  renamed(cmd, { "--round-timeout": "--round-timeout-s (seconds)" });
  return examples(cmd, "rlloop demo", "rlloop demo --ui");
}
