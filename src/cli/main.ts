// `rlloop <command>`: the only place that parses flags and decides exit codes (exit-codes.ts). Each command's file
// holds its flags and a few lines of action that lazily import what it runs, so `--help` is instant and needs neither
// NATS nor libtorch. A failure is one clear line and its cause chain on stderr, scrubbed of secrets.
import { Command, CommanderError, Option } from "commander";
import { causeChain } from "../loop/errors.js";
import { scrub } from "../redact.js";
import { daemonCommand } from "./daemon.js";
import { demoCommand } from "./demo.js";
import { exitCodeOf } from "./exit-codes.js";
import { reloadCommand } from "./reload.js";
import { replayCommand } from "./replay.js";
import { rollbackCommand } from "./rollback.js";
import { simulateCommand } from "./simulate.js";
import { statusCommand } from "./status.js";
import { trainCommand } from "./train.js";
import { uiCommand } from "./ui.js";
import { PACKAGE_VERSION } from "../version.js";
import { watchCommand } from "./watch.js";

export function program(): Command {
  const root = new Command("rlloop")
    .description("always-on RL loop for a Qwen3.5 LoRA policy: NATS JetStream rollouts → PPO rounds → adapters")
    .version(PACKAGE_VERSION, "-V, --version", "print the version")
    .addOption(new Option("--log-format <format>", "log lines: pretty on a terminal, JSON otherwise (default: by where stdout goes; RLLOOP_LOG_FORMAT)").choices(["json", "pretty"]))
    .showHelpAfterError()
    .hook("preAction", async (cmd) => {
      const format = cmd.opts<{ logFormat?: "json" | "pretty" }>().logFormat;
      if (format !== undefined) (await import("../log.js")).setLogFormat(format);
    });
  for (const cmd of [daemonCommand(), replayCommand(), statusCommand(), rollbackCommand(), trainCommand(), simulateCommand(), reloadCommand(), watchCommand(), uiCommand(), demoCommand()]) {
    root.addCommand(cmd);
  }
  exitOverrideAll(root);
  return root;
}

/** Commander's own exits (help, version, usage errors) become CommanderErrors, mapped to exit codes below. */
function exitOverrideAll(cmd: Command): void {
  cmd.exitOverride();
  for (const sub of cmd.commands) exitOverrideAll(sub);
}

async function main(argv: string[]): Promise<void> {
  try {
    await program().parseAsync(argv);
  } catch (err) {
    // commander has printed its own message (usage errors, --help, --version)
    if (!(err instanceof CommanderError)) {
      const [first, ...rest] = causeChain(err).map(scrub);
      process.stderr.write(`rlloop: ${first}\n${rest.map((l) => `  caused by ${l}\n`).join("")}`);
    }
    process.exit(exitCodeOf(err));
  }
}

await main(process.argv);
