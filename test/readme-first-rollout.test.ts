// The README's "Publish your first rollout" snippet, run as written (the venv's python, from the repository root)
// against a daemon on a real nats-server: its rollout is validated by the shipped schema, stored, and trained.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../src/loop/config/index.js";
import { Daemon } from "../src/loop/daemon.js";
import { venvPython } from "../src/setup-env.js";
import { REPO, accounting, startLoopEnv, testFrame, waitFor, type LoopEnv } from "./helpers/loop.js";

describe("README - publish your first rollout", () => {
  let env: LoopEnv;
  let daemon: Daemon;

  beforeAll(async () => {
    env = await startLoopEnv();
    daemon = new Daemon({ config: parseConfig(env.config({ policy: { name: "bt", codeLength: 6, maxSteps: 8 }, round: { rows: 1, maxWaitS: null, minRows: 1 }, log: { level: "warn" } })) });
    await daemon.start();
  });

  afterAll(async () => {
    await daemon?.stop();
    await env?.close();
  });

  it("the snippet publishes a rollout the daemon trains", async () => {
    const readme = readFileSync(join(REPO, "README.md"), "utf8");
    const section = readme.slice(readme.indexOf("## Publish your first rollout"));
    const code = /```python\n([\s\S]*?)```/.exec(section)?.[1];
    expect(code).toBeTruthy();
    const frame = join(env.dir, "frame.png");
    writeFileSync(frame, await testFrame());
    const run = await execa(venvPython(), ["-c", code!], { cwd: REPO, env: { FRAME: frame, RLLOOP_NATS_URL: env.server.url } });
    expect(run.stdout).toMatch(/^stored as stream sequence \d+$/);
    const acc = await waitFor("the rollout trained", async () => {
      const a = await accounting(env);
      return a.rounds.size === 1 ? a : null;
    });
    expect([...acc.rounds.values()]).toEqual([[1]]);
    expect(acc.rejections.size).toBe(0);
  });
});
