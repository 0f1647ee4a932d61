// `rlloop ui`: the web dashboard of a running loop, served on loopback by default. A monitor: it reads NATS only
// (run.ts), so it runs wherever `rlloop watch` runs. Mounted by src/cli.ts's MOUNTS list.
import { Command, InvalidArgumentError } from "commander";

export interface UiFlags {
  config?: string;
  nats?: string;
  policy?: string;
  host: string;
  port: number;
  token?: string;
  rewardHistory: number;
  timeout: number;
}

/** The port the page is served on unless --port says otherwise (beside the daemon's metrics default, 9464). */
export const DEFAULT_UI_PORT = 9465;

function integer(flag: string, min: number, max = Number.MAX_SAFE_INTEGER) {
  return (value: string): number => {
    const n = Number(value);
    if (value.trim() === "" || !Number.isInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`${flag} must be an integer in [${min}, ${max}], got ${JSON.stringify(value)}`);
    }
    return n;
  };
}

export function registerUiCommand(program: Command): void {
  program.addCommand(
    new Command("ui")
      .description("web dashboard of a running loop: phase, health, buffer, per-round plots, rewards by adapter, rejections, adapters and replicas, live")
      .option("--config <file>", "config JSON: policy, NATS connection, round.rows, observe.statsIntervalS (default: config/default.json)")
      .option("--nats <url>", "NATS server (default: config nats.url, else the daemon's own server)")
      .option("--policy <name>", "policy (default: config policy.name)")
      .option("--host <host>", "address to listen on; anything but loopback exposes the page to the network", "127.0.0.1")
      .option("--port <n>", "port to listen on, 0 = any free one", integer("--port", 0, 65535), DEFAULT_UI_PORT)
      .option("--token <token>", "require this token (open the page as /?token=…); prefer RLLOOP_UI_TOKEN, which ps does not show (default: none)")
      .option("--reward-history <n>", "newest rollouts read back for the reward plot; each is read whole, frames included", integer("--reward-history", 0), 5000)
      .option("--timeout <ms>", "timeout of each request to the daemon's service in ms", integer("--timeout", 1), 2000)
      .action(async (flags: UiFlags) => {
        const { runUi } = await import("./run.js");
        await runUi(flags);
      }),
  );
}
