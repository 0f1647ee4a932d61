// A real nats-server for tests: JetStream on, loopback, a port the server picks, a temp store dir.
// `restart()` keeps port and store (a server restart the clients must survive); `stop()` removes the store.
// The binary: the pinned release scripts/setup.sh installed (src/setup-env.ts; $RLLOOP_NATS_SERVER overrides it).
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnNatsServer } from "../../src/loop/nats-server-process.js";
import { natsServerBinary } from "../../src/setup-env.js";

export { natsServerBinary };

export interface NatsServer {
  url: string;
  port: number;
  storeDir: string;
  /** the monitoring endpoint of the running server (its port changes with a restart) */
  monitorUrl(): string;
  /** SIGTERM, wait for exit; the store dir is kept until stop() */
  shutdown(): Promise<void>;
  /** shutdown, then start again on the same port and store */
  restart(): Promise<void>;
  /** shutdown and remove the store */
  stop(): Promise<void>;
}

function waitExit(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolveExit) => child.once("exit", () => resolveExit()));
}

export async function startNatsServer(): Promise<NatsServer> {
  const storeDir = mkdtempSync(join(tmpdir(), "rlloop-nats-"));
  // the first start lets the server pick its port; a restart asks for the same one
  const first = await spawnNatsServer({ bin: natsServerBinary(), host: "127.0.0.1", port: 0, store: storeDir });
  let child: ChildProcess | null = first.child;
  let monitorUrl = first.monitorUrl;
  const shutdown = async () => {
    if (!child) return;
    const exiting = waitExit(child);
    child.kill("SIGTERM");
    await exiting;
    child = null;
  };
  return {
    url: first.url,
    port: first.port,
    storeDir,
    monitorUrl: () => monitorUrl,
    shutdown,
    async restart() {
      await shutdown();
      const next = await spawnNatsServer({ bin: natsServerBinary(), host: "127.0.0.1", port: first.port, store: storeDir });
      child = next.child;
      monitorUrl = next.monitorUrl;
    },
    async stop() {
      await shutdown();
      rmSync(storeDir, { recursive: true, force: true });
    },
  };
}
