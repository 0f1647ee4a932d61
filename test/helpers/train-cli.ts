// `rlloop train ...` for the tests: the train command mounted on a bare commander program, run as a subprocess
// (node --import tsx test/helpers/train-cli.ts train sft ...), so exit codes and stderr are the real ones.
import { Command } from "commander";
import { registerTrainCommand } from "../../src/train/command.js";

const program = new Command("rlloop").exitOverride((err) => process.exit(err.exitCode));
registerTrainCommand(program);
await program.parseAsync(process.argv);
