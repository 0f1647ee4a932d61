// The Python venv that scripts/setup.sh creates (torch, transformers, PEFT): used at run time only by the demo's
// model generator and the seed optimizer.pt importer. RLLOOP_PYTHON overrides .rlloop/env.json.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ENV_FILE = join(dirname(fileURLToPath(import.meta.url)), "..", ".rlloop", "env.json");

/** The venv's python; throws with the fix (run scripts/setup.sh) when there is none. */
export function venvPython(): string {
  if (process.env.RLLOOP_PYTHON) return process.env.RLLOOP_PYTHON;
  try {
    return (JSON.parse(readFileSync(ENV_FILE, "utf8")) as { python: string }).python;
  } catch (cause) {
    throw new Error(`no Python environment (${ENV_FILE} unreadable): run scripts/setup.sh or set RLLOOP_PYTHON`, { cause });
  }
}
