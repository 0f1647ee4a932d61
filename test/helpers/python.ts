// The reference Python of the tests (torch, transformers, peft): $RLLOOP_PYTHON, else .rlloop/env.json's "python"
// (written by scripts/setup.sh). Scripts run with scripts/reference/ as the working directory so their sibling
// imports resolve; a failure's message carries the command and the tail of stderr, where Python puts the traceback.
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { execa } from "execa";

export const REPO_ROOT = resolve(import.meta.dirname, "..", "..");
export const REFERENCE_DIR = join(REPO_ROOT, "scripts", "reference");

export function referencePython(): string {
  if (process.env.RLLOOP_PYTHON) return process.env.RLLOOP_PYTHON;
  const envFile = join(REPO_ROOT, ".rlloop", "env.json");
  if (!existsSync(envFile)) {
    throw new Error(`no reference Python: set RLLOOP_PYTHON or run scripts/setup.sh (it writes ${envFile})`);
  }
  const python = (JSON.parse(readFileSync(envFile, "utf8")) as { python?: string }).python;
  if (!python) throw new Error(`${envFile} has no "python" entry; run scripts/setup.sh`);
  return python;
}

/** Runs scripts/reference/<script> with args; resolves with stdout, rejects with the command and stderr's tail. */
export async function runReferenceScript(script: string, args: string[]): Promise<string> {
  const result = await execa(referencePython(), [join(REFERENCE_DIR, script), ...args], {
    cwd: REFERENCE_DIR,
    reject: false,
    // One thread pool of two: CI has two cores and vitest runs two files at a time.
    env: { OMP_NUM_THREADS: "2", PYTHONUNBUFFERED: "1", HF_HUB_OFFLINE: "1", TRANSFORMERS_NO_ADVISORY_WARNINGS: "1" },
  });
  if (result.exitCode !== 0) {
    const tail = result.stderr.split("\n").slice(-25).join("\n");
    throw new Error(`reference script failed (exit ${result.exitCode}): ${script} ${args.join(" ")}\n${tail}`);
  }
  return result.stdout;
}
