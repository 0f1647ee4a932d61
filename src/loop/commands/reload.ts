// `rlloop reload --vllm URL...`: the built-in reloader (DESIGN.md step 8). Follows rlloop.<policy>.adapters and
// loads each published adapter on every vLLM replica under its versioned name, unloading versions beyond --keep;
// outcomes are published on rlloop.<policy>.reloads. Runs until SIGINT/SIGTERM.
import { Command } from "commander";
import { nonNegativeInt, positiveInt } from "./options.js";

export interface ReloadFlags {
  config?: string;
  nats?: string;
  policy?: string;
  vllm: string[];
  dir?: string;
  keep?: number;
  retries: number;
  retryMinMs: number;
  retryMaxMs: number;
  timeout: number;
  checkIntervalS: number;
  prune: boolean;
}

export function registerReloadCommand(program: Command): void {
  program.addCommand(
    new Command("reload")
      .description("load every published adapter into vLLM replicas (VLLM_ALLOW_RUNTIME_LORA_UPDATING=True) by versioned name")
      .requiredOption("--vllm <url...>", "base URLs of the vLLM replicas, e.g. --vllm http://gpu1:8000 http://gpu2:8000")
      .option("--config <file>", "config JSON: policy, offPolicy.maxStaleness, NATS connection (default: config/default.json)")
      .option("--nats <url>", "NATS server (default: config nats.url, else the daemon's own server)")
      .option("--policy <name>", "policy (default: config policy.name)")
      .option("--dir <dir>", "local adapter directory, readable by the vLLM servers at the same path (default: <workDir>/reloader)")
      .option("--keep <n>", "versions each replica keeps loaded (default: offPolicy.maxStaleness + 1)", positiveInt("--keep"))
      // the defaults wait ~8 minutes for a replica (or the object store) to come back: a vLLM restart takes minutes
      .option("--retries <n>", "retries of a transient failure (unreachable, 408/429/502/503/504)", nonNegativeInt("--retries"), 20)
      .option("--retry-min-ms <ms>", "first backoff; doubles per retry", positiveInt("--retry-min-ms"), 500)
      .option("--retry-max-ms <ms>", "longest backoff", positiveInt("--retry-max-ms"), 30_000)
      .option("--timeout <ms>", "per HTTP request to vLLM (a load reads the adapter onto the GPU)", positiveInt("--timeout"), 120_000)
      .option("--check-interval-s <s>", "how often each replica is asked whether it still serves the newest adapter (a restarted vLLM forgets them; 0 = never)", nonNegativeInt("--check-interval-s"), 30)
      .option("--no-prune", "keep local copies of adapters older than --keep")
      .addHelpText("after", "\nThe vLLM API key, when the servers run with --api-key, is read from VLLM_API_KEY (never a flag: flags show in ps).")
      .action(async (flags: ReloadFlags) => {
        const { runReload } = await import("../reload/run.js");
        await runReload(flags);
      }),
  );
}
