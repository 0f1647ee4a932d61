import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readRows } from "../src/train/rows.js";

async function jsonl(lines: string[]): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "rlloop-rows-"));
  const path = join(dir, "rows.jsonl");
  await writeFile(path, lines.join("\n") + "\n");
  return path;
}

const good = { image: "f.png", name: "red cup", code: "0123", adv: 0.5, vllm_logp: -1.25 };

describe("train rows", () => {
  it("reads ppo rows with their line numbers, skipping blank lines and keeping memory", async () => {
    const path = await jsonl([JSON.stringify(good), "", JSON.stringify({ ...good, memory: ["01", "1"] })]);
    const rows = await readRows(path, "ppo");
    expect(rows.map((r) => r.line)).toEqual([1, 3]);
    expect(rows[1]!.memory).toEqual(["01", "1"]);
    expect(rows[0]!.adv).toBe(0.5);
  });

  it("reads sft rows without adv and vllm_logp", async () => {
    const { adv: _a, vllm_logp: _v, ...sft } = good;
    expect((await readRows(await jsonl([JSON.stringify(sft)]), "sft"))[0]!.code).toBe("0123");
  });

  const bad: [string, string, RegExp][] = [
    ["non-digit code", JSON.stringify({ ...good, code: "01a3" }), /line 2: field 'code' must be a non-empty string of digits, got "01a3"/],
    ["empty code", JSON.stringify({ ...good, code: "" }), /line 2: field 'code' must be a non-empty string of digits/],
    ["missing image", JSON.stringify({ ...good, image: undefined }), /line 2: field 'image' .*got nothing/],
    ["positive vllm_logp", JSON.stringify({ ...good, vllm_logp: 0.5 }), /line 2: field 'vllm_logp' must be <= 0/],
    ["adv as a string", JSON.stringify({ ...good, adv: "1" }), /line 2: field 'adv' must be a finite number, got "1"/],
    ["memory of one string", JSON.stringify({ ...good, memory: ["01"] }), /line 2: field 'memory.1' must be a string of 0\/1 characters, got nothing/],
    ["memory with a 2", JSON.stringify({ ...good, memory: ["01", "2"] }), /line 2: field 'memory.1' must be a string of 0\/1/],
    ["not JSON", "{image: 1}", /line 2: not valid JSON/],
    ["an array", "[1, 2]", /line 2: must be a JSON object, got \[1,2\]/],
    ["a shorter code", JSON.stringify({ ...good, code: "012" }), /line 2: field 'code' has 3 digits but line 1 has 4/],
  ];
  for (const [what, line, message] of bad) {
    it(`rejects ${what}, naming the line and field`, async () => {
      const path = await jsonl([JSON.stringify(good), line]);
      await expect(readRows(path, "ppo")).rejects.toThrow(message);
    });
  }

  it("rejects a missing file and an empty one", async () => {
    await expect(readRows("/nonexistent/rows.jsonl", "sft")).rejects.toThrow(
      "--data /nonexistent/rows.jsonl: cannot read (no such file)",
    );
    await expect(readRows(await jsonl([""]), "sft", "--valid")).rejects.toThrow(/--valid .*: no rows/);
  });
});
