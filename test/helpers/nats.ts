// A real nats-server for tests: JetStream on, loopback, a random free port, a temp store dir.
// `restart()` keeps port and store (a server restart the clients must survive); `stop()` removes the store.
// The binary: the pinned release scripts/setup.sh installed (src/setup-env.ts; $RLLOOP_NATS_SERVER overrides it).
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnNatsServer } from "../../src/loop/nats-server.js";
import { natsServerBinary } from "../../src/setup-env.js";

export { natsServerBinary };

export interface NatsServer {
  url: string;
  port: number;
  storeDir: string;
  /** SIGTERM, wait for exit; the store dir is kept until stop() */
  shutdown(): Promise<void>;
  /** shutdown, then start again on the same port and store */
  restart(): Promise<void>;
  /** shutdown and remove the store */
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

function waitExit(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolveExit) => child.once("exit", () => resolveExit()));
}

export async function startNatsServer(): Promise<NatsServer> {
  const storeDir = mkdtempSync(join(tmpdir(), "rlloop-nats-"));
  const port = await freePort();
  let child: ChildProcess | null = await spawnNatsServer(natsServerBinary(), "127.0.0.1", port, storeDir);
  const shutdown = async () => {
    if (!child) return;
    const exiting = waitExit(child);
    child.kill("SIGTERM");
    await exiting;
    child = null;
  };
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    storeDir,
    shutdown,
    async restart() {
      await shutdown();
      child = await spawnNatsServer(natsServerBinary(), "127.0.0.1", port, storeDir);
    },
    async stop() {
      await shutdown();
      rmSync(storeDir, { recursive: true, force: true });
    },
  };
}
