// The daemon's own nats-server, used when config.nats.url is null: JetStream on, store under <workDir>/nats/,
// listening on nats.serverHost:nats.serverPort (0 = a port the server picks). The server is a child process; its pid and port
// are kept in <workDir>/nats/server.json so that a daemon restarted after a SIGKILL (which leaves the child
// running, holding the store) adopts it instead of failing to start a second one on the same store.
import { setTimeout as sleep } from "node:timers/promises";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import type { Config } from "./config/index.js";
import { writeFileAtomic } from "../files.js";
import { spawnNatsServer } from "./nats-server-process.js";
import { natsDir } from "./paths.js";
import { diskRoom } from "./disk-room.js";
import { NoDiskRoomError } from "./errors.js";
import { natsServerBinary } from "../setup-env.js";

/** Free space a server needs to start (its ports file, server.json, JetStream's first files); what it then stores is
 *  the server's to handle. */
const SERVER_START_BYTES = 1 << 20;

export interface OwnServer {
  url: string;
  stop(): Promise<void>;
}

interface ServerFile { pid: number; port: number; host: string }

export async function startOwnServer(config: Config, log: Logger): Promise<OwnServer> {
  const dir = natsDir(config.workDir);
  await mkdir(dir, { recursive: true });
  const infoFile = join(dir, "server.json");
  const adopted = adoptable(infoFile);
  if (adopted) {
    log.info({ pid: adopted.pid, port: adopted.port }, "adopting the nats-server left by a previous daemon");
    return { url: `nats://${adopted.host}:${adopted.port}`, stop: () => stopPid(adopted.pid, infoFile) };
  }
  // a server started on a disk without room fails with no errno to tell the disk's fault (its ports file not written,
  // or JetStream's buckets refused): the disk is asked first, and again should the server fail, so that the daemon's
  // start waits for the disk (daemon.ts) instead of ending
  const noRoom = async (cause?: unknown) => {
    const room = await diskRoom(dir, SERVER_START_BYTES, "starting the server").catch(() => null);
    return room === null ? null : new NoDiskRoomError(`the daemon's own nats-server cannot start: ${room}`, { cause });
  };
  const before = await noRoom();
  if (before) throw before;
  const server = await spawnNatsServer({ bin: config.nats.serverBin ?? natsServerBinary(), host: config.nats.serverHost, port: config.nats.serverPort, store: join(dir, "store") })
    .catch(async (err: unknown) => {
      throw (await noRoom(err)) ?? err;
    });
  const pid = server.child.pid as number;
  try {
    await writeFileAtomic(infoFile, JSON.stringify({ pid, port: server.port, host: server.host }));
  } catch (err) {
    server.child.kill("SIGKILL"); // unnamed on the disk, no later start could adopt or stop it
    throw err;
  }
  log.info({ pid, port: server.port }, "started own nats-server");
  return { url: server.url, stop: () => stopPid(pid, infoFile) };
}

/** URL of the daemon's own nats-server when one is running for this work dir (for replay and status). */
export function runningOwnServerUrl(workDir: string): string | null {
  const info = adoptable(join(natsDir(workDir), "server.json"));
  return info ? `nats://${info.host}:${info.port}` : null;
}

function adoptable(infoFile: string): ServerFile | null {
  if (!existsSync(infoFile)) return null;
  try {
    const info = JSON.parse(readFileSync(infoFile, "utf8")) as ServerFile;
    process.kill(info.pid, 0);
    const cmdline = readFileSync(`/proc/${info.pid}/cmdline`, "utf8");
    return cmdline.includes("nats-server") ? info : null;
  } catch {
    return null;
  }
}

async function stopPid(pid: number, infoFile: string): Promise<void> {
  // one that will not stop on SIGTERM (a store on a failing disk) must not hold the store while a next start spawns
  // another: it is killed after 10 s
  if (!(await signalAndWait(pid, "SIGTERM", 10_000))) await signalAndWait(pid, "SIGKILL", 5_000);
  await rm(infoFile, { force: true });
}

/** Sends `signal` and waits up to `ms` for the process to be gone; whether it is. */
async function signalAndWait(pid: number, signal: NodeJS.Signals, ms: number): Promise<boolean> {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
  for (let waited = 0; waited < ms && alive(pid); waited += 100) await sleep(100);
  return !alive(pid);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
