// A process's model and its assets (loadModelWithAssets, src/train/run-job.ts): the tokenizer, chat template and
// image options are read while the weights load — Model.load is issued before the tokenizer, whose build blocks the
// JS thread, is read — and a read that fails there fails neither the load nor a later good read.
import { copyFile, cp, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { Model } from "../src/native.js";
import { loadModelWithAssets } from "../src/train/run-job.js";
import { tinyTokenizerDir } from "./helpers/train-fixtures.js";
import { trainFixture } from "./helpers/train-run.js";

const calls = vi.hoisted(() => [] as string[]);
vi.mock("../src/train/tokenizer.js", async (importActual) => {
  const actual = await importActual<typeof import("../src/train/tokenizer.js")>();
  return { ...actual, loadTokenizer: (dir: string) => (calls.push("tokenizer"), actual.loadTokenizer(dir)) };
});

describe("train model load - the assets are read while the weights load", () => {
  let dir: string;
  const spec = () => ({ dir, device: "cpu", dtype: "float32", checkpointing: "auto", tf32: "auto", attention: "flash" }) as const;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "rlloop-model-load-"));
    await cp(join(await trainFixture(), "model"), dir, { recursive: true });
    const load = Model.load.bind(Model);
    vi.spyOn(Model, "load").mockImplementation((...args) => (calls.push("load"), load(...args)));
  });
  afterAll(async () => {
    vi.restoreAllMocks();
    await rm(dir, { recursive: true, force: true });
  });

  it("issues the load first and has the assets when the model is there", async () => {
    calls.length = 0;
    const loaded = await loadModelWithAssets(spec());
    expect(calls).toEqual(["load", "tokenizer"]);
    // settled by the time the model is: an already-settled promise wins a race against a later-listed resolved one
    const notRead = Symbol("not read yet");
    expect(await Promise.race([loaded.assets.collator(), Promise.resolve(notRead)])).not.toBe(notRead);
    expect(loaded.model.info.hiddenSize).toBeGreaterThan(0);
  });

  it("a tokenizer that cannot be read fails neither the load nor a later read once it is fixed", async () => {
    const tokenizer = join(dir, "tokenizer.json");
    await writeFile(tokenizer, "{ not json");
    const broken = await loadModelWithAssets(spec());
    expect(broken.model.info.hiddenSize).toBeGreaterThan(0);
    await expect(broken.assets.collator()).rejects.toThrow(/tokenizer/i); // the first job's own read reports it
    await copyFile(join(await tinyTokenizerDir(), "tokenizer.json"), tokenizer);
    expect((await broken.assets.collator()).tokenizer.idOf("<|im_end|>")).toBeGreaterThan(0);
  });
});
