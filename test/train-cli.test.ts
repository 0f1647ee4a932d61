// `rlloop train` input errors: each is one clear line on stderr and a non-zero exit, before any model loads.
import { copyFile, mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { beforeAll, describe, expect, it } from "vitest";
import { ROOT, realTokenizerDir } from "./helpers/train-fixtures.js";

const CLI = join(ROOT, "test", "helpers", "train-cli.ts");

async function train(args: string[]) {
  const r = await execa(process.execPath, ["--import", "tsx", CLI, "train", ...args], { cwd: ROOT, reject: false });
  return { code: r.exitCode, stderr: r.stderr.trim() };
}

describe("train cli - input errors", () => {
  let dir: string;
  let model: string;
  let adapter: string;
  const good = { image: "", name: "cup", code: "012", adv: 1, vllm_logp: -3 };
  const rowsFile = async (name: string, rows: unknown[]) => {
    const path = join(dir, name);
    await writeFile(path, rows.map((r) => JSON.stringify(r)).join("\n") + "\n");
    return path;
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "rlloop-train-cli-"));
    model = join(dir, "model");
    await mkdir(model);
    const tok = await realTokenizerDir();
    for (const f of ["tokenizer.json", "tokenizer_config.json", "preprocessor_config.json"]) await copyFile(join(tok, f), join(model, f));
    await writeFile(join(model, "config.json"), "{}");
    await writeFile(join(model, "model.safetensors"), "");
    adapter = join(dir, "adapter");
    await mkdir(adapter);
    for (const f of ["adapter_config.json", "adapter_model.safetensors"]) await writeFile(join(adapter, f), "{}");
    const png = join(dir, "frame.png");
    const sharp = (await import("sharp")).default;
    await sharp({ create: { width: 40, height: 30, channels: 3, background: { r: 10, g: 200, b: 30 } } }).png().toFile(png);
    good.image = png;
    await writeFile(join(dir, "broken.png"), "not a png");
  });

  const ppo = (data: string, extra: string[] = []) => [
    "ppo", "--model", model, "--data", data, "--adapter", adapter, "--ref", adapter, "--out", join(dir, "out"), ...extra,
  ];

  it("names a missing --data file", async () => {
    const r = await train(ppo(join(dir, "nope.jsonl")));
    expect(r).toEqual({ code: 2, stderr: `rlloop train ppo: --data ${join(dir, "nope.jsonl")}: no such file` });
  });

  it("names the row and field that fail validation", async () => {
    const data = await rowsFile("bad-field.jsonl", [good, { ...good, adv: "high" }]);
    const r = await train(ppo(data));
    expect(r).toEqual({ code: 2, stderr: `rlloop train ppo: ${data} line 2: field 'adv' must be a finite number, got "high"` });
  });

  it("refuses codes of different lengths", async () => {
    const data = await rowsFile("lengths.jsonl", [good, good, { ...good, code: "0123" }]);
    const r = await train(ppo(data));
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`rlloop train ppo: ${data} line 3: field 'code' has 4 digits but line 1 has 3 (all rows of a run must share the code length)`);
  });

  it("names an unreadable and a missing image with its row", async () => {
    const broken = await rowsFile("broken.jsonl", [good, { ...good, image: join(dir, "broken.png") }]);
    const r1 = await train(ppo(broken));
    expect(r1.code).toBe(2);
    expect(r1.stderr).toMatch(new RegExp(`^rlloop train ppo: ${broken} line 2: image ${join(dir, "broken.png")}: cannot read \\(.+\\)$`));
    const missing = await rowsFile("missing.jsonl", [{ ...good, image: join(dir, "gone.png") }]);
    const r2 = await train(ppo(missing));
    expect(r2).toEqual({ code: 2, stderr: `rlloop train ppo: ${missing} line 1: image ${join(dir, "gone.png")}: cannot read (no such file)` });
  });

  it("names a model folder without weights and an adapter folder that is missing", async () => {
    const data = await rowsFile("ok.jsonl", [good]);
    const empty = join(dir, "empty-model");
    await mkdir(empty, { recursive: true });
    const r1 = await train(["sft", "--model", empty, "--data", data, "--out", join(dir, "o")]);
    expect(r1).toEqual({ code: 2, stderr: `rlloop train sft: --model ${empty}: missing config.json, tokenizer.json, preprocessor_config.json` });
    const r2 = await train(["ppo", "--model", model, "--data", data, "--adapter", join(dir, "no-adapter"), "--ref", adapter, "--out", join(dir, "o")]);
    expect(r2).toEqual({ code: 2, stderr: `rlloop train ppo: --adapter ${join(dir, "no-adapter")}: no such folder` });
  });

  it("rejects a missing required flag and a bad number through commander, one line each", async () => {
    const data = await rowsFile("ok2.jsonl", [good]);
    const r1 = await train(["ppo", "--model", model, "--data", data, "--adapter", adapter, "--out", join(dir, "o")]);
    expect(r1).toEqual({ code: 2, stderr: "error: required option '--ref <dir>' not specified" });
    const r2 = await train(ppo(data, ["--epochs", "0"]));
    expect(r2.code).toBe(2);
    expect(r2.stderr).toBe(`error: option '--epochs <n>' argument '0' is invalid. --epochs must be a positive integer, got "0"`);
  });

  it("explains every flag in --help", async () => {
    const r = await execa(process.execPath, ["--import", "tsx", CLI, "train", "ppo", "--help"], { cwd: ROOT });
    for (const flag of ["--data", "--out", "--model", "--adapter", "--ref", "--epochs", "--lr", "--batch", "--accumulation", "--seed", "--gpus", "--tis-cap", "--mismatch-stats", "--prompt"]) {
      expect(r.stdout).toContain(flag);
    }
    expect(r.stdout).toContain("(default: 3e-6, constant)");
  });
});
