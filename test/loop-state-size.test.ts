// The state record is one KV message: a server whose max_payload cannot hold it with the guard's group sums would make
// every commit fail, retried for ever. Against a real nats-server with a small max_payload: the start refuses, naming
// the settings; without the group sums it starts.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../src/loop/config/index.js";
import { Daemon } from "../src/loop/daemon.js";
import { ConfigError } from "../src/loop/errors.js";
import { launchServer, type LaunchedServer } from "./helpers/nats-configured.js";
import { startLoopEnv, type LoopEnv } from "./helpers/loop.js";

describe("loop - the state record fits the server's max_payload", () => {
  let dir: string;
  let server: LaunchedServer;
  let env: LoopEnv;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "rlloop-state-size-"));
    server = await launchServer(dir, `listen: 127.0.0.1:-1\nhttp: 127.0.0.1:-1\nmax_payload: 262144\njetstream { store_dir: ${JSON.stringify(join(dir, "js"))} }`, { healthy: true });
    env = await startLoopEnv({ nats: { url: `nats://127.0.0.1:${server.ports.client}`, stop: () => server.kill() } });
  });
  afterAll(async () => {
    await env?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("a start whose guard keeps more group sums than the server's max_payload holds is refused, naming the settings; without them it starts", async () => {
    const guard = { rewardRange: { min: 0, max: 1 }, baselines: 3, maxGroups: 512 };
    const refused = new Daemon({ config: parseConfig(env.config({ guard, log: { level: "fatal" } })) });
    const err = await refused.start().then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/^the server's max_payload \(262144 bytes\) cannot hold the state record: up to 147456 bytes of the guard's group sums \('guard.maxGroups' 512, 'guard.baselines' 3\)/);
    const fits = new Daemon({ config: parseConfig(env.config({ guard: { ...guard, maxGroups: 256 }, log: { level: "fatal" } })) });
    await fits.start();
    await fits.stop();
  });
});
