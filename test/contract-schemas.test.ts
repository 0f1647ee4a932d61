// One source for every schema, default and description: the committed JSON Schema files, config/default.json and
// config/README.md's tables are what scripts/gen-schemas.ts generates from the zod schemas now; the generated
// rollout schema accepts and refuses what the daemon does.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { MAX_REJECTION_MESSAGE_CHARS, rejectionMessage } from "../src/contract/index.js";
import { REPO } from "./helpers/loop.js";

describe("contract - generated files", () => {
  it("schema/*.json, config/default.json and config/README.md's tables are current (npx tsx scripts/gen-schemas.ts)", () => {
    const run = () => execFileSync(process.execPath, ["--import", "tsx", join(REPO, "scripts", "gen-schemas.ts"), "--check"], { cwd: REPO, encoding: "utf8", stdio: "pipe" });
    expect(run()).toBe("generated files are current\n");
  });

  it("the rollout schema documents every field and carries the default limits", () => {
    const schema = JSON.parse(readFileSync(join(REPO, "schema", "rollout-completed.schema.json"), "utf8")) as {
      properties: Record<string, { description?: string; maxLength?: number }>; required: string[];
    };
    expect(schema.required.sort()).toEqual(["adapter", "id", "policy", "reward", "steps"]);
    for (const [name, field] of Object.entries(schema.properties)) expect(field.description, name).toBeTruthy();
    expect(schema.properties.id?.maxLength).toBe(256);
  });
});

describe("contract - a rejection's message", () => {
  it("is kept whole up to its bound, else cut to it with the length it had, never inside a surrogate pair", () => {
    const fits = "x".repeat(MAX_REJECTION_MESSAGE_CHARS);
    expect(rejectionMessage(fits)).toBe(fits);
    const long = "y".repeat(5 * MAX_REJECTION_MESSAGE_CHARS);
    expect(rejectionMessage(long)).toMatch(new RegExp(`^y+… \\(${long.length} characters\\)$`));
    expect(rejectionMessage(long)).toHaveLength(MAX_REJECTION_MESSAGE_CHARS);
    for (let at = 0; at < 40; at++) {
      const text = `${"z".repeat(MAX_REJECTION_MESSAGE_CHARS - 40 + at)}${"😀".repeat(MAX_REJECTION_MESSAGE_CHARS)}`;
      const cut = rejectionMessage(text);
      expect(cut.length).toBeLessThanOrEqual(MAX_REJECTION_MESSAGE_CHARS);
      expect(Buffer.from(cut).toString(), `cut at ${at}`).toBe(cut); // a lone surrogate would come back as U+FFFD
    }
  });
});
