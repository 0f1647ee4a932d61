// What `rlloop demo` shows on the terminal: a line per stage and per published round while it runs, then the table of
// published adapters; the full log (daemon, trainer ranks, nats) goes to <work>/demo.log, whose path it names first.
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { setLogFile } from "../../log.js";
import { DEMO_POLICY, runDemo, type DemoRound } from "./demo.js";

export interface DemoCommandOptions {
  rounds: number;
  rows: number;
  work: string;
  seed: number;
  roundTimeoutS: number;
  ui: boolean;
  uiPort: number;
  /** the demo loop's workDir, where the dashboard finds its nats-server */
  uiWorkDir: string;
}

export async function runDemoCommand(opts: DemoCommandOptions, out: (line: string) => void = (line) => process.stdout.write(`${line}\n`)): Promise<void> {
  const work = resolve(opts.work);
  mkdirSync(work, { recursive: true });
  const logFile = join(work, "demo.log");
  setLogFile(logFile);
  out(`rlloop demo: ${opts.rounds} PPO round${opts.rounds === 1 ? "" : "s"} of ${opts.rows} rows on the CPU, at toy size (full log: ${logFile})`);
  const demo = runDemo({ rounds: opts.rounds, rowsPerRound: opts.rows, workDir: work, seed: opts.seed, roundTimeoutS: opts.roundTimeoutS }, {
    stage: (text) => out(`  ${text}`),
    round: (r, seconds) => out(`  round ${r.round}/${opts.rounds} published: ${r.name}, ${r.rows} rows, pg_loss ${r.pgLoss.toFixed(4)}, kl ${r.kl.toFixed(4)} (${seconds.toFixed(1)} s)`),
  });
  demo.catch(() => {}); // awaited below; this only keeps a failure while the dashboard starts from counting as unhandled
  const ui = opts.ui
    ? await (await import("../ui/demo.js")).serveDemoUi({ workDir: opts.uiWorkDir, policy: DEMO_POLICY, port: opts.uiPort, rowsPerRound: opts.rows, demo })
    : null;
  const rounds = await demo;
  out("");
  out(formatRounds(rounds));
  await ui?.afterDemo();
}

export function formatRounds(rounds: DemoRound[]): string {
  const head = "round  adapter       rows  pg_loss     kl  clip_frac  logp_gap  sha256";
  const lines = rounds.map((r) =>
    [String(r.round).padStart(5), r.name.padEnd(12), String(r.rows).padStart(5), r.pgLoss.toFixed(4).padStart(8),
     r.kl.toFixed(4).padStart(6), r.clipFrac.toFixed(3).padStart(10), r.logpGap.toFixed(3).padStart(9), r.sha256].join("  "));
  return [head, ...lines].join("\n");
}
