// `rlloop reload --vllm URL...`: the built-in reloader (DESIGN.md step 8). Follows rlloop.<policy>.adapter.published
// and loads each published adapter on every vLLM replica under its versioned name, unloading versions beyond --keep;
// outcomes are published on rlloop.<policy>.replica.<kind>. Runs until SIGINT/SIGTERM (exit 0 once stopped).
import { Command } from "commander";
import type { ReloadFlags } from "../tools/reload/run.js";
import { examples, nonNegativeInt, positiveInt, positiveNumber, renamed, withConnection } from "./options.js";

export function reloadCommand(): Command {
  const cmd = withConnection(new Command("reload")
    .description("load every published adapter into vLLM replicas (VLLM_ALLOW_RUNTIME_LORA_UPDATING=True) by versioned name")
    .requiredOption("--vllm <url...>", "base URLs of the vLLM replicas, e.g. --vllm http://gpu1:8000 http://gpu2:8000"), "policy, offPolicy.maxStaleness, NATS connection")
    .option("--dir <dir>", "local adapter directory, readable by the vLLM servers at the same path (default: <workDir>/reloader)")
    .option("--keep <n>", "versions each replica keeps loaded (default: offPolicy.maxStaleness + 1)", positiveInt("--keep"))
    // the defaults wait ~8 minutes for a replica (or the object store) to come back: a vLLM restart takes minutes
    .option("--retries <n>", "retries of a transient failure (unreachable, 408/429/502/503/504)", nonNegativeInt("--retries"), 20)
    .option("--retry-min-s <s>", "first backoff; doubles per retry", positiveNumber("--retry-min-s"), 0.5)
    .option("--retry-max-s <s>", "longest backoff", positiveNumber("--retry-max-s"), 30)
    .option("--timeout-s <s>", "per HTTP request to vLLM (a load reads the adapter onto the GPU)", positiveNumber("--timeout-s"), 120)
    .option("--check-interval-s <s>", "how often each replica is asked whether it still serves the newest adapter (a restarted vLLM forgets them; 0 = never)", nonNegativeInt("--check-interval-s"), 30)
    .option("--no-prune", "keep local copies of adapters older than --keep")
    .addHelpText("after", "\nThe vLLM API key, when the servers run with --api-key, is read from VLLM_API_KEY (never a flag: flags show in ps).")
    .action(async (flags: ReloadFlags) => {
      const { runReload } = await import("../tools/reload/run.js");
      await runReload(flags);
    });
  renamed(cmd, { "--retry-min-ms": "--retry-min-s (seconds)", "--retry-max-ms": "--retry-max-s (seconds)", "--timeout": "--timeout-s (seconds)" });
  return examples(cmd, "rlloop reload --config bt.json --vllm http://gpu1:8000 http://gpu2:8000 --dir /shared/adapters");
}
