// `rlloop <command>`. Subcommand actions are a few lines and lazily import what they run, so `--help` is instant
// and needs neither NATS nor libtorch. Commands other parts provide (train, simulate, reload, watch, demo) are
// mounted when their module exists. Only this file decides the exit code: one clear line, the cause chain, exit 1.
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Command, InvalidArgumentError } from "commander";

const here = dirname(fileURLToPath(import.meta.url));

/** Optional command modules: path from src/ (without extension) and the function registering the command. */
const MOUNTS: Array<[string, string]> = [
  ["train/command", "registerTrainCommand"],
  ["loop/commands/simulate", "registerSimulateCommand"],
  ["loop/commands/reload", "registerReloadCommand"],
  ["loop/commands/watch", "registerWatchCommand"],
  ["loop/commands/demo", "registerDemoCommand"],
  ["tools/ui/command", "registerUiCommand"],
];

function positiveInt(flag: string) {
  return (value: string) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`${flag} must be a positive integer, got ${JSON.stringify(value)}`);
    return n;
  };
}

async function loadConfigFrom(file: string | undefined) {
  const { loadConfig } = await import("./loop/config/index.js");
  return loadConfig(file === undefined ? {} : { file });
}

function daemonCommand(): Command {
  return new Command("daemon")
    .description("run the loop: JetStream rollouts → PPO rounds → published adapters (SIGTERM drains)")
    .option("--config <file>", "config JSON; RLLOOP_* environment variables override it (default: config/default.json)")
    .action(async (opts: { config?: string }) => {
      const config = await loadConfigFrom(opts.config);
      const { Daemon } = await import("./loop/daemon.js");
      const daemon = new Daemon({ config });
      let signals = 0;
      const onSignal = (signal: string) => {
        signals++;
        if (signals > 1) process.exit(1);
        daemon.log.info({ signal }, "signal received; draining (send again to exit now)");
        void daemon.stop();
      };
      process.on("SIGTERM", () => onSignal("SIGTERM"));
      process.on("SIGINT", () => onSignal("SIGINT"));
      await daemon.start();
      const fatal = await daemon.closed;
      if (fatal) throw fatal;
    });
}

function replayCommand(): Command {
  return new Command("replay")
    .description("rebuild a round's train.jsonl from the stream, check its sha256 against the manifest, optionally re-train")
    .requiredOption("--round <n>", "round number", positiveInt("--round"))
    .option("--out <dir>", "output folder (default: <workDir>/replay/<policy>/<round>)")
    .option("--train", "re-run the round from its parent adapter into <out>/adapter (the live state is untouched)", false)
    .option("--config <file>", "config JSON (default: config/default.json)")
    .action(async (opts: { round: number; out?: string; train: boolean; config?: string }) => {
      const config = await loadConfigFrom(opts.config);
      const { replayRound } = await import("./loop/replay.js");
      const result = await replayRound({ config, round: opts.round, out: opts.out, train: opts.train });
      process.stdout.write(`${JSON.stringify({ round: opts.round, ...result, match: true })}\n`);
    });
}

function statusCommand(): Command {
  return new Command("status")
    .description("ask the running daemon (micro service `rlloop`) for its status; falls back to the KV state record")
    .option("--config <file>", "config JSON (default: config/default.json)")
    .option("--timeout <ms>", "request timeout (default: 2000)", positiveInt("--timeout"), 2000)
    .action(async (opts: { config?: string; timeout: number }) => {
      const config = await loadConfigFrom(opts.config);
      const { queryStatus } = await import("./loop/status.js");
      process.stdout.write(`${JSON.stringify(await queryStatus(config, opts.timeout), null, 2)}\n`);
    });
}

async function mountOptional(program: Command) {
  for (const [path, fn] of MOUNTS) {
    const file = [".js", ".ts"].map((ext) => join(here, `${path}${ext}`)).find((f) => existsSync(f));
    if (!file) continue;
    const mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
    const register = mod[fn];
    if (typeof register === "function") (register as (p: Command) => void)(program);
  }
}

async function main(argv: string[]) {
  const program = new Command("rlloop")
    .description("always-on RL loop for a Qwen3.5 LoRA policy: NATS JetStream rollouts → PPO rounds → adapters")
    .showHelpAfterError()
    .addCommand(daemonCommand())
    .addCommand(replayCommand())
    .addCommand(statusCommand());
  await mountOptional(program);
  await program.parseAsync(argv);
}

main(process.argv).catch(async (err: unknown) => {
  const { causeChain } = await import("./loop/errors.js");
  const [first, ...rest] = causeChain(err);
  process.stderr.write(`rlloop: ${first}\n${rest.map((l) => `  caused by ${l}\n`).join("")}`);
  process.exit(1);
});
