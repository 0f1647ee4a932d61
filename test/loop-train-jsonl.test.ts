// train.jsonl as a trainer reads it: one row a line, whatever a valid rollout's strings hold. The seed reads it with
// Python's str.splitlines, which also ends a line at characters JSON.stringify leaves raw (U+0085, U+2028, U+2029):
// read here with the reference Python, as the seed does.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { trainJsonl } from "../src/loop/assemble.js";
import { parseConfig } from "../src/loop/config/index.js";
import { parseRollout, validateContext } from "../src/loop/validate.js";
import { referencePython } from "./helpers/python.js";
import { CODE_LENGTH, makeRollout, POLICY } from "./helpers/loop.js";

/** Every character Python's str.splitlines ends a line at. */
const LINE_BREAKS = ["\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"];

describe("loop - train.jsonl rows", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "rlloop-train-jsonl-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("keeps each row on one line for Python's splitlines, with every line-break character in a valid step name (its one free-form string)", async () => {
    const config = parseConfig({ policy: { name: POLICY, codeLength: CODE_LENGTH } });
    const input = await makeRollout("breaks", 0, { steps: LINE_BREAKS.length });
    input.steps.forEach((step, k) => (step.name = `a${LINE_BREAKS[k]}b`));
    const rollout = parseRollout(Buffer.from(JSON.stringify(input)), validateContext(config)); // admitted as valid
    const text = trainJsonl([{ seq: 1, rollout }], config.advantage);
    const file = join(dir, "train.jsonl");
    await writeFile(file, text);
    const read = "import json, sys\nrows = [json.loads(l) for l in open(sys.argv[1], encoding='utf-8').read().splitlines()]\nprint(json.dumps([r['name'] for r in rows]))";
    const { stdout } = await execa(referencePython(), ["-c", read, file]);
    expect(JSON.parse(stdout)).toEqual(LINE_BREAKS.map((c) => `a${c}b`));
  });
});
