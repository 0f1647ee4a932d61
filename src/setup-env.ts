// What scripts/setup.sh installed, as recorded in .rlloop/env.json: the Python venv (torch, transformers, PEFT; used
// at run time only by the demo's model generator and the seed optimizer.pt importer) and the pinned nats-server
// (the daemon's own server, the demo and the tests). RLLOOP_PYTHON / RLLOOP_NATS_SERVER override the file.
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ENV_FILE = join(dirname(fileURLToPath(import.meta.url)), "..", ".rlloop", "env.json");

interface SetupEnv {
  python?: string;
  natsServer?: string;
  natsServerMin?: string;
}

function setupEnv(): SetupEnv | null {
  try {
    return JSON.parse(readFileSync(ENV_FILE, "utf8")) as SetupEnv;
  } catch {
    return null;
  }
}

/** The venv's python; throws with the fix (run scripts/setup.sh) when there is none. */
export function venvPython(): string {
  if (process.env.RLLOOP_PYTHON) return process.env.RLLOOP_PYTHON;
  const python = setupEnv()?.python;
  if (python === undefined) throw new Error(`no Python environment (${ENV_FILE} unreadable): run scripts/setup.sh or set RLLOOP_PYTHON`);
  return python;
}

/**
 * The nats-server binary to start: $RLLOOP_NATS_SERVER, else the release setup pinned (scripts/versions.sh), else
 * `nats-server` on PATH. `minimum` asks for the oldest supported release setup installed beside it.
 */
export function natsServerBinary(which: "pinned" | "minimum" = "pinned"): string {
  if (which === "pinned" && process.env.RLLOOP_NATS_SERVER) return process.env.RLLOOP_NATS_SERVER;
  const env = setupEnv();
  const bin = which === "pinned" ? env?.natsServer : env?.natsServerMin;
  if (bin !== undefined && existsSync(bin)) return bin;
  if (which === "minimum") throw new Error(`no minimum-version nats-server in ${ENV_FILE}: run scripts/setup.sh`);
  return "nats-server";
}
