// `rlloop simulate`: synthetic RolloutCompleted events (groups of rollouts per scenario, episodes of rendered frames,
// codes with exact log-probs, rewards that track the code) to rlloop.<policy>.rollouts, or with --bad the table of
// malformed events the daemon must reject. One JSON line per event and a summary.
import { Command } from "commander";
import type { SimulateFlags } from "../tools/sim/run.js";
import { examples, nonNegativeInt, positiveInt, positiveNumber, probability, withConnection } from "./options.js";

export function simulateCommand(): Command {
  const cmd = withConnection(new Command("simulate")
    .description("publish synthetic rollouts (or, with --bad, malformed events) to rlloop.<policy>.rollouts"), "policy name and code length, NATS connection")
    .option("--count <n>", "rollouts to publish", positiveInt("--count"), 32)
    .option("--group-size <g>", "rollouts per scenario, sharing a group id", positiveInt("--group-size"), 4)
    .option("--max-steps <s>", "episodes have 1..s steps", positiveInt("--max-steps"), 4)
    .option("--seed <n>", "seed; the same seed gives the same events", nonNegativeInt("--seed"), 0)
    .option("--rate <r>", "rollouts per second (default: as fast as JetStream acks)", positiveNumber("--rate"))
    .option("--frame-root <dir>", "write frames under dir and send {path} (must be one of the daemon's frames.roots); default: inline png_base64")
    .option("--width <px>", "frame width", positiveInt("--width"), 640)
    .option("--height <px>", "frame height", positiveInt("--height"), 480)
    .option("--levels <n>", "values a code digit takes, 2..10", positiveInt("--levels"), 8)
    .option("--adapter-round <n>", "round of the adapter that served the rollouts", nonNegativeInt("--adapter-round"), 0)
    .option("--adapter-name <name>", "its name (default: <policy>-r<round>)")
    .option("--skill <p>", "probability of the right digit at round 0", probability("--skill"), 0.35)
    .option("--skill-per-round <p>", "added per adapter round, capped at 0.95", probability("--skill-per-round"), 0.05)
    .option("--regress-at <round>", "robots that regress: adapters from this round on lose --regress-by skill (the live-outcome guard's test)", nonNegativeInt("--regress-at"))
    .option("--regress-by <p>", "skill lost by a regressed adapter", probability("--regress-by"), 0.3)
    .option("--drift-from <round>", "robots that drift: from this round on each adapter loses --drift-per-round skill", nonNegativeInt("--drift-from"))
    .option("--drift-per-round <p>", "skill lost per round of drift", probability("--drift-per-round"), 0.05)
    .option("--memory-bits <n>", "length of the two memory bit strings per step; 0 = no memory", nonNegativeInt("--memory-bits"), 4)
    .option("--run <tag>", "prefix of ids and groups (default: sim-s<seed>)")
    .option("--start <n>", "index of the first rollout, to extend an earlier run", nonNegativeInt("--start"), 0)
    .option("--bad", "publish the malformed-event table instead (one event per case)", false)
    .option("--quiet", "print only the summary", false)
    .action(async (flags: SimulateFlags) => {
      const { runSimulate } = await import("../tools/sim/run.js");
      await runSimulate(flags, (line) => process.stdout.write(`${line}\n`));
    });
  return examples(cmd, "rlloop simulate --config bt.json --count 256 --rate 20", "rlloop simulate --config bt.json --bad");
}
