// `rlloop train ...` for the tests: the train command mounted on a bare commander program, run as a subprocess
// (node --import tsx test/helpers/train-cli.ts train sft ...), so exit codes and stderr are the real ones.
import { Command } from "commander";
import { exitCodeOf } from "../../src/cli/exit-codes.js";
import { trainCommand } from "../../src/cli/train.js";

const program = new Command("rlloop").addCommand(trainCommand());
const override = (cmd: Command): void => {
  cmd.exitOverride((err) => process.exit(exitCodeOf(err)));
  cmd.commands.forEach(override);
};
override(program);
await program.parseAsync(process.argv);
