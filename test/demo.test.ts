// The README's main command, as a newcomer runs it: `rlloop demo` end to end on the CPU (embedded nats-server,
// tiny random Qwen3.5, simulator, daemon, the real `rlloop train ppo` per round), then the adapters it announced
// load in PEFT-layout form from the round folders.
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);

describe("demo - the README's main command", () => {
  it("runs two PPO rounds end to end and prints one line per published adapter", async () => {
    const work = mkdtempSync(join(tmpdir(), "rlloop-demo-"));
    const { stdout } = await run(process.execPath, ["bin/rlloop.js", "demo", "--rounds", "2", "--rows", "8", "--work", work], {
      maxBuffer: 64 * 1024 * 1024,
    });
    // a progress view (the full log, daemon and trainer ranks, goes to the file its first line names), then the table
    const lines = stdout.trim().split("\n");
    expect(lines[0]).toBe(`rlloop demo: 2 PPO rounds of 8 rows on the CPU, at toy size (full log: ${join(work, "demo.log")})`);
    expect(lines.filter((l) => l.startsWith("{"))).toEqual([]);
    expect(lines.filter((l) => /^ {2}round \d\/2 published: demo-r\d, 8 rows, pg_loss/.test(l))).toHaveLength(2);
    const log = readFileSync(join(work, "demo.log"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as { component: string; msg: string });
    expect(log.some((l) => l.component === "loop" && l.msg === "round committed")).toBe(true);
    expect(log.some((l) => l.component === "train")).toBe(true);
    const table = lines.slice(lines.findIndex((l) => l.startsWith("round ")));
    expect(table[0]).toMatch(/^round\s+adapter\s+rows\s+pg_loss/);
    expect(table.slice(1).map((l) => l.trim().split(/\s+/).slice(0, 3))).toEqual([
      ["1", "demo-r1", "8"],
      ["2", "demo-r2", "8"],
    ]);
    for (const round of ["000001", "000002"]) {
      const dir = join(work, "loop", "rounds", "demo", round);
      const manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) as { status: string };
      expect(manifest.status).toBe("committed");
      expect(existsSync(join(dir, "adapter", "adapter_model.safetensors"))).toBe(true);
      const stats = JSON.parse(readFileSync(join(dir, "adapter", "stats.json"), "utf8")) as Record<string, number>;
      expect(Object.keys(stats).sort()).toEqual(expect.arrayContaining(["clip_frac", "kl", "logp_gap", "logp_gap_abs", "pg_loss", "rows", "train_s"]));
      expect(Number.isFinite(stats.pg_loss)).toBe(true);
    }
    // run again in the same folder: the model is reused, the loop starts afresh (it resumed the old rounds once,
    // and waited for a round 1 that was long committed)
    const again = await run(process.execPath, ["bin/rlloop.js", "demo", "--rounds", "1", "--rows", "4", "--work", work, "--round-timeout-s", "120"], {
      maxBuffer: 64 * 1024 * 1024,
    });
    const rerun = again.stdout.trim().split("\n");
    expect(rerun.slice(rerun.findIndex((l) => l.startsWith("round ")) + 1).map((l) => l.trim().split(/\s+/).slice(0, 2))).toEqual([["1", "demo-r1"]]);
  });
});
