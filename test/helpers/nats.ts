// A real nats-server for tests: JetStream on, loopback, a random free port, a temp store dir.
// `restart()` keeps port and store (a server restart the clients must survive); `stop()` removes the store.
// The binary: $RLLOOP_NATS_SERVER, else .rlloop/env.json's "natsServer", else nats-server on PATH.
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnNatsServer } from "../../src/loop/nats-server.js";

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

export function natsServerBinary(): string {
  if (process.env.RLLOOP_NATS_SERVER) return process.env.RLLOOP_NATS_SERVER;
  const envFile = join(process.cwd(), ".rlloop", "env.json");
  if (existsSync(envFile)) {
    const bin = (JSON.parse(readFileSync(envFile, "utf8")) as { natsServer?: string }).natsServer;
    if (bin && existsSync(bin)) return bin;
  }
  return "nats-server";
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

/** Spawn nats-server and resolve once it logs readiness; rejects with its output if it exits first. */

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
