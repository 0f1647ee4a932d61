// `rlloop daemon`: the loop. The first SIGTERM/SIGINT drains (exit 0 once drained); a second one exits at once
// (143/130), which is safe: nothing uncommitted is ever acked.
import { Command } from "commander";
import { EXIT } from "./exit-codes.js";
import { examples } from "./options.js";

export function daemonCommand(): Command {
  const cmd = new Command("daemon")
    .description("run the loop: JetStream rollouts → PPO rounds → published adapters (SIGTERM drains)")
    .option("--config <file>", "config JSON; RLLOOP_* environment variables override it (default: config/default.json)")
    .option("--standby", "start as a standby: check everything, start the trainer, wait for the policy's lease and take over when the active daemon stops (lease.standby)")
    .action(async (opts: { config?: string; standby?: boolean }) => {
      const { loadConfig } = await import("../loop/config/index.js");
      const config = loadConfig({ ...(opts.config === undefined ? {} : { file: opts.config }), ...(opts.standby ? { overrides: { lease: { standby: true } } } : {}) });
      const { Daemon } = await import("../loop/daemon.js");
      const daemon = new Daemon({ config });
      let signals = 0;
      const onSignal = (signal: "SIGTERM" | "SIGINT") => {
        if (++signals > 1) process.exit(signal === "SIGINT" ? EXIT.sigint : EXIT.sigterm);
        daemon.log.info({ signal }, "signal received; draining (send again to exit now)");
        void daemon.stop();
      };
      process.on("SIGTERM", () => onSignal("SIGTERM"));
      process.on("SIGINT", () => onSignal("SIGINT"));
      await daemon.start();
      const fatal = await daemon.closed;
      if (fatal) throw fatal;
    });
  return examples(cmd, "rlloop daemon --config /etc/rlloop/bt.json", "RLLOOP_NATS_URL=nats://nats:4222 rlloop daemon --config bt.json", "rlloop daemon --config /etc/rlloop/bt.json --standby");
}
