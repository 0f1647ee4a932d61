// `rlloop demo`: the loop end to end at toy size on the CPU (src/loop/demo.ts says what runs).
import { join } from "node:path";
import { Command } from "commander";
import { positiveInt } from "./options.js";

export function registerDemoCommand(program: Command): void {
  program.addCommand(
    new Command("demo")
      .description("run the whole loop on CPU: embedded nats-server, tiny random Qwen3.5, simulated rollouts, PPO rounds, published adapters")
      .option("--rounds <n>", "PPO rounds to run (default: 3)", positiveInt("--rounds"), 3)
      .option("--rows <n>", "decision rows per round (default: 16)", positiveInt("--rows"), 16)
      .option("--work <dir>", "work folder: model (kept), rounds and nats store (started afresh each run) (default: runs/demo)", "runs/demo")
      .option("--seed <n>", "simulation and trainer seed (default: 0)", Number, 0)
      .option("--round-timeout <s>", "give up on a round after this many seconds (default: 900)", positiveInt("--round-timeout"), 900)
      .option("--ui", "serve the web dashboard of the loop on loopback while it runs, and its final state afterwards until Ctrl-C", false)
      .option("--ui-port <n>", "the dashboard's port (default: 9465)", positiveInt("--ui-port"), 9465)
      .action(async (opts: { rounds: number; rows: number; work: string; seed: number; roundTimeout: number; ui: boolean; uiPort: number }) => {
        const { runDemo } = await import("../demo.js");
        const demo = runDemo({ rounds: opts.rounds, rowsPerRound: opts.rows, workDir: opts.work, seed: opts.seed, roundTimeoutS: opts.roundTimeout });
        demo.catch(() => {}); // awaited below; this only keeps a failure while the dashboard starts from counting as unhandled
        // "demo" is the demo's policy (src/loop/demo.ts)
        const ui = opts.ui
          ? await (await import("../../tools/ui/demo.js")).serveDemoUi({ workDir: join(opts.work, "loop"), policy: "demo", port: opts.uiPort, rowsPerRound: opts.rows, demo })
          : null;
        process.stdout.write(`${formatRounds(await demo)}\n`);
        await ui?.afterDemo();
      }),
  );
}

function formatRounds(rounds: Array<{ round: number; rows: number; name: string; sha256: string; pgLoss: number; kl: number; clipFrac: number; logpGap: number }>): string {
  const head = "round  adapter       rows  pg_loss     kl  clip_frac  logp_gap  sha256";
  const lines = rounds.map((r) =>
    [String(r.round).padStart(5), r.name.padEnd(12), String(r.rows).padStart(5), r.pgLoss.toFixed(4).padStart(8),
     r.kl.toFixed(4).padStart(6), r.clipFrac.toFixed(3).padStart(10), r.logpGap.toFixed(3).padStart(9), r.sha256].join("  "));
  return [head, ...lines].join("\n");
}
