// `rlloop rollback --to-round N`: the running daemon serves and continues round N's adapter again (issue 23).
import { Command } from "commander";
import { examples, nonNegativeInt, positiveNumber, withConnection } from "./options.js";

export function rollbackCommand(): Command {
  const cmd = withConnection(new Command("rollback"), "for the policy and NATS")
    .description("ask the running daemon to serve round N's adapter again and continue training from it (done between rounds; prints the announcement)")
    .requiredOption("--to-round <n>", "the round whose adapter to go back to (0 = the initial adapter)", nonNegativeInt("--to-round"))
    .option("--reason <text>", "why, recorded in the state record and the announcement")
    .option("--timeout-s <s>", "how long to wait for the daemon's answer (it comes after the round in hand)", positiveNumber("--timeout-s"), 600)
    .action(async (opts: { config?: string; nats?: string; policy?: string; toRound: number; reason?: string; timeoutS: number }) => {
      const { loadConfig } = await import("../loop/config/index.js");
      const config = loadConfig(opts.config === undefined ? {} : { file: opts.config });
      const { requestRollback } = await import("../tools/rollback/request.js");
      process.stdout.write(`${JSON.stringify(await requestRollback(config, opts), null, 2)}\n`);
    });
  return examples(cmd, "rlloop rollback --config bt.json --to-round 5 --reason 'grasp success dropped on the line'");
}
