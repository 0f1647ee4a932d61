// Option parsers and options shared by the commands. Each parser refuses a bad value with the flag, the rule and the
// value ("--count must be a positive integer, got "0""). Durations are seconds everywhere, flags named `-s` as the
// config's fields are named `S`; a flag renamed to that convention fails with a pointer to its new name.
import { Command, InvalidArgumentError, Option } from "commander";

function parser(flag: string, rule: string, accept: (n: number) => boolean) {
  return (value: string): number => {
    const n = Number(value);
    if (value.trim() === "" || !accept(n)) throw new InvalidArgumentError(`${flag} must be ${rule}, got ${JSON.stringify(value)}`);
    return n;
  };
}

export const positiveInt = (flag: string) => parser(flag, "a positive integer", (n) => Number.isInteger(n) && n >= 1);
export const nonNegativeInt = (flag: string) => parser(flag, "an integer >= 0", (n) => Number.isInteger(n) && n >= 0);
export const positiveNumber = (flag: string) => parser(flag, "a positive number", (n) => Number.isFinite(n) && n > 0);
export const nonNegativeNumber = (flag: string) => parser(flag, "a number >= 0", (n) => Number.isFinite(n) && n >= 0);
export const probability = (flag: string) => parser(flag, "a number in [0, 1]", (n) => Number.isFinite(n) && n >= 0 && n <= 1);
export const port = (flag: string) => parser(flag, "a port in [0, 65535]", (n) => Number.isInteger(n) && n >= 0 && n <= 65535);

/** --config, --nats and --policy, as every operator command takes them. */
export function withConnection(cmd: Command, configHelp: string): Command {
  return cmd
    .option("--config <file>", `config JSON: ${configHelp} (default: config/default.json)`)
    .option("--nats <url>", "NATS server (default: config nats.url, else the daemon's own server)")
    .option("--policy <name>", "policy (default: config policy.name)");
}

/** Hidden flags that were renamed: using one fails with its new name. */
export function renamed(cmd: Command, renames: Record<string, string>): Command {
  for (const [old, replacement] of Object.entries(renames)) {
    cmd.addOption(new Option(`${old} <value>`).hideHelp().argParser(() => {
      throw new InvalidArgumentError(`${old} was renamed to ${replacement}`);
    }));
  }
  return cmd;
}

/** The help's closing example lines. */
export function examples(cmd: Command, ...lines: string[]): Command {
  return cmd.addHelpText("after", `\nExample${lines.length > 1 ? "s" : ""}:\n${lines.map((l) => `  $ ${l}`).join("\n")}`);
}
