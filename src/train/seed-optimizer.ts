// Import of a seed run's optimizer.pt (a torch pickle keyed by parameter index): converted once by
// scripts/import_seed_optimizer.py with the venv's torch + transformers + PEFT, which rebuild the seed's parameter
// order. The result is cached under the OS temp folder, keyed by the file's path, size and mtime and the adapter
// and model folders (the sidecar JSON, written last and atomically, marks a finished conversion).
import { existsSync } from "node:fs";
import { stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createHash } from "node:crypto";
import { execa } from "execa";
import { venvPython as sharedVenvPython } from "../setup-env.js";
import { TrainInputError } from "./errors.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const SCRIPT = join(ROOT, "scripts", "import_seed_optimizer.py");

/** The venv python; a missing venv is an input error of this command. */
export function venvPython(): string {
  try {
    return sharedVenvPython();
  } catch (err) {
    throw new TrainInputError("importing a seed optimizer.pt needs the Python venv: run scripts/setup.sh or set RLLOOP_PYTHON", { cause: err });
  }
}

/** Converts `ptPath` and returns the path of the equivalent optimizer.safetensors. */
export async function importSeedOptimizer(ptPath: string, adapterDir: string, modelDir: string): Promise<string> {
  const info = await stat(ptPath);
  const key = createHash("sha256").update(`${resolve(ptPath)}:${info.size}:${info.mtimeMs}:${resolve(adapterDir)}:${resolve(modelDir)}`).digest("hex").slice(0, 16);
  const out = join(tmpdir(), `rlloop-seed-optimizer-${key}`, "optimizer.safetensors");
  if (existsSync(out.replace(/\.safetensors$/, ".json"))) return out;
  try {
    await execa(venvPython(), [SCRIPT, ptPath, adapterDir, modelDir, out]);
  } catch (err) {
    const detail = (err as { stderr?: string }).stderr?.trim().split("\n").at(-1) ?? (err as Error).message;
    throw new TrainInputError(`${ptPath}: cannot import the seed optimizer state (${detail})`, { cause: err });
  }
  return out;
}
