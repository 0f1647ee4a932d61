// `rlloop replay --round N`: rebuild a committed round from the stream and check it (exit 4 when it differs).
import { Command } from "commander";
import { examples, positiveInt } from "./options.js";

export function replayCommand(): Command {
  const cmd = new Command("replay")
    .description("rebuild a round's train.jsonl from the stream, check its sha256 against the manifest, optionally re-train")
    .requiredOption("--round <n>", "round number", positiveInt("--round"))
    .option("--out <dir>", "output folder (default: <workDir>/replay/<policy>/<round>)")
    .option("--train", "re-run the round from its parent adapter into <out>/adapter (the live state is untouched)", false)
    .option("--config <file>", "config JSON (default: config/default.json)")
    .action(async (opts: { round: number; out?: string; train: boolean; config?: string }) => {
      const { loadConfig } = await import("../loop/config/index.js");
      const config = loadConfig(opts.config === undefined ? {} : { file: opts.config });
      const { replayRound } = await import("../loop/replay.js");
      const result = await replayRound({ config, round: opts.round, out: opts.out, train: opts.train });
      process.stdout.write(`${JSON.stringify({ round: opts.round, ...result, match: true })}\n`);
    });
  return examples(cmd, "rlloop replay --round 12 --config bt.json", "rlloop replay --round 12 --train --out /tmp/r12 --config bt.json");
}
