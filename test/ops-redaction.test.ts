// The redaction sweep: every command run with secrets in its config and its environment — user:password in the NATS
// URL, a password and a token, a trainer environment value, the vLLM API key, the UI token — and not one of them in
// any stdout, stderr, log line (debug level) or file the daemon writes (manifests, stats, trainer logs).
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { execa, type ResultPromise } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { subjects } from "../src/contract/index.js";
import { startFakeVllm, type FakeVllm } from "./helpers/fake-vllm.js";
import { POLICY, REPO, cliArgs, eventsOn, makeRollout, publishRollouts, spawnDaemon, startLoopEnv, waitFor, type LoopEnv } from "./helpers/loop.js";

const SECRETS = {
  urlPass: "url-pass-7f3a9c",
  pass: "nats-pass-1b2c3d",
  token: "nats-token-4e5f6a",
  hfToken: "hf_trainerenv_8d9e0f",
  vllmKey: "vllm-key-2a3b4c",
  uiToken: "ui-token-5d6e7f80",
};

/** Every file under `dir`, recursively (text read as UTF-8; binary safetensors included: a secret must not be there either). */
function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...filesUnder(path));
    else out.push(path);
  }
  return out;
}

describe("ops - no secret in any output, log or file", () => {
  let env: LoopEnv;
  let vllm: FakeVllm;
  const outputs: string[] = [];
  let config: string;
  let cliEnv: Record<string, string>;

  beforeAll(async () => {
    env = await startLoopEnv();
    vllm = await startFakeVllm();
    const url = env.server.url.replace("nats://", `nats://sweeper:${SECRETS.urlPass}@`);
    config = env.writeConfig({ nats: { url }, trainer: { env: { HF_TOKEN: SECRETS.hfToken } }, log: { level: "debug" } });
    cliEnv = { VLLM_API_KEY: SECRETS.vllmKey, RLLOOP_UI_TOKEN: SECRETS.uiToken, RLLOOP_LOG_LEVEL: "debug" };
  });

  afterAll(async () => {
    await vllm?.close();
    await env?.close();
  });

  const cli = async (...args: string[]) => {
    const run = await execa(process.execPath, cliArgs(...args), { cwd: REPO, env: cliEnv, reject: false, all: true, timeout: 120_000 });
    outputs.push(run.all ?? "");
    return run;
  };
  /** A long-running command, stopped by SIGINT once `ready` is seen in its output. */
  const until = async (ready: RegExp, ...args: string[]) => {
    // a command that does not end on its SIGINT fails here with what it printed, instead of hanging the suite
    const child: ResultPromise<{ all: true; reject: false; timeout: number }> = execa(process.execPath, cliArgs(...args), { cwd: REPO, env: cliEnv, reject: false, all: true, timeout: 120_000 });
    let text = "";
    child.all?.on("data", (chunk: Buffer) => (text += chunk.toString()));
    await waitFor(`${args[0]} ready`, () => ready.test(text) || null, 60_000);
    child.kill("SIGINT");
    const run = await child;
    expect(run.timedOut, `${args[0]} did not end on SIGINT:\n${run.all ?? text}`).toBe(false);
    outputs.push(run.all ?? text);
    return run;
  };

  it("daemon, status, replay, simulate, watch, reload, ui and a failing command leak nothing", async () => {
    const daemon = spawnDaemon(config, cliEnv);
    await daemon.waitForLog("daemon started", (l) => l.msg === "daemon started");
    await publishRollouts(env.js, await Promise.all([0, 1, 2, 3].map((i) => makeRollout("sweep", i, { steps: 2 }))));
    await waitFor("round 1 published", async () => (await eventsOn(env.jsm, subjects(POLICY).adapterPublished)).length === 1 || null);

    expect((await cli("status", "--config", config)).exitCode).toBe(0);
    expect((await cli("replay", "--round", "1", "--train", "--config", config)).exitCode).toBe(0);
    expect((await cli("simulate", "--config", config, "--count", "2", "--max-steps", "1", "--width", "64", "--height", "48")).exitCode).toBe(0);
    expect((await cli("watch", "--config", config, "--once")).exitCode).toBe(0);
    await until(/replica|reloader following/, "reload", "--config", config, "--vllm", vllm.url);
    await until(/rlloop ui: policy/, "ui", "--config", config, "--port", "0");
    // the other ways to give NATS credentials: a password and a token from the environment (one way per config)
    const byPass = env.writeConfig({ nats: { user: "sweeper" }, log: { level: "debug" } });
    expect((await execa(process.execPath, cliArgs("status", "--config", byPass), { cwd: REPO, env: { ...cliEnv, RLLOOP_NATS_PASS: SECRETS.pass }, all: true }).then((r) => (outputs.push(r.all), r))).exitCode).toBe(0);
    const byToken = env.writeConfig({ log: { level: "debug" } });
    expect((await execa(process.execPath, cliArgs("watch", "--config", byToken, "--once"), { cwd: REPO, env: { ...cliEnv, RLLOOP_NATS_TOKEN: SECRETS.token }, all: true }).then((r) => (outputs.push(r.all), r))).exitCode).toBe(0);
    // a failure whose message names the URL
    const down = env.writeConfig({ nats: { url: `nats://sweeper:${SECRETS.urlPass}@127.0.0.1:1` } });
    expect((await cli("status", "--config", down, "--timeout-s", "0.5")).exitCode).toBe(1);

    daemon.child.kill("SIGTERM");
    expect(await daemon.exited).toBe(0);
    outputs.push(daemon.lines.map((l) => JSON.stringify(l)).join("\n"));

    const files = filesUnder(env.workDir).map((path) => ({ path, text: readFileSync(path).toString("latin1") }));
    expect(files.some((f) => f.path.endsWith("manifest.json"))).toBe(true);
    expect(outputs.join("\n")).toContain("[redacted]");
    const leaks: string[] = [];
    for (const [name, secret] of Object.entries(SECRETS)) {
      outputs.forEach((text, i) => text.includes(secret) && leaks.push(`${name} in output ${i}`));
      for (const f of files) if (f.text.includes(secret)) leaks.push(`${name} in ${f.path}`);
    }
    expect(leaks).toEqual([]);
  });
});
