// Starting a nats-server process (the daemon's own server, the tests', the benches'): JetStream on, its store where
// asked, its client port as asked or — with port 0 — chosen by the server itself (`-p -1`) and read back from the
// ports file it writes, so no port is guessed and raced for; ready when its monitoring endpoint's /healthz answers
// 200 (JetStream up), not when a line appears in its log.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

export interface NatsServerProcess {
  child: ChildProcess;
  host: string;
  /** the client port */
  port: number;
  url: string;
  /** the HTTP monitoring endpoint (/healthz, /connz, /jsz): a port the server picked */
  monitorUrl: string;
}

export interface SpawnOptions {
  bin: string;
  host: string;
  /** 0 = a port the server picks */
  port: number;
  store: string;
  /** give up waiting for readiness after this long (default 60 s) */
  readyTimeoutMs?: number;
}

const POLL_MS = 50;

export async function spawnNatsServer(opts: SpawnOptions): Promise<NatsServerProcess> {
  const portsDir = join(opts.store, "ports");
  await mkdir(portsDir, { recursive: true });
  const args = ["-js", "-a", opts.host, "-p", String(opts.port || -1), "-m", "-1", "-sd", opts.store, "--ports_file_dir", portsDir];
  const child = spawn(opts.bin, args, { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000));
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const failed = new Promise<never>((_, reject) => {
    child.once("error", (err) => reject(new Error(`cannot start ${opts.bin} (nats.serverBin): ${err.message}`, { cause: err })));
    child.once("exit", (code) => reject(new Error(`${opts.bin} exited with ${code} before it was ready:\n${output}`)));
  });
  failed.catch(() => {});
  try {
    const ports = await Promise.race([readPorts(portsDir, child, opts.readyTimeoutMs ?? 60_000), failed]);
    await Promise.race([healthy(ports.monitor, opts.host, opts.readyTimeoutMs ?? 60_000), failed]);
    child.stdout?.off("data", keep);
    child.stderr?.off("data", keep);
    child.stdout?.resume();
    child.stderr?.resume();
    return { child, host: opts.host, port: ports.client, url: `nats://${opts.host}:${ports.client}`, monitorUrl: `http://${opts.host}:${ports.monitor}` };
  } catch (err) {
    child.kill("SIGKILL");
    throw err;
  } finally {
    await rm(portsDir, { recursive: true, force: true });
  }
}

/** The ports file (`<binary>_<pid>.ports`, JSON with `nats` and `monitoring` URLs) the server writes once listening. */
async function readPorts(dir: string, child: ChildProcess, timeoutMs: number): Promise<{ client: number; monitor: number }> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const file = existsSync(dir) ? readdirSync(dir).find((f) => f.endsWith(`_${child.pid}.ports`)) : undefined;
    if (file) {
      try {
        const ports = JSON.parse(readFileSync(join(dir, file), "utf8")) as { nats?: string[]; monitoring?: string[] };
        const client = Number(new URL(ports.nats?.[0] ?? "").port);
        const monitor = Number(new URL(ports.monitoring?.[0] ?? "").port);
        if (client > 0 && monitor > 0) return { client, monitor };
      } catch {
        // written but not complete yet
      }
    }
    await sleep(POLL_MS);
  }
  throw new Error(`nats-server (pid ${child.pid}) wrote no ports file within ${timeoutMs / 1000} s`);
}

async function healthy(port: number, host: string, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}/healthz`;
  while (Date.now() < until) {
    const res = await fetch(url).catch(() => null);
    if (res?.ok) return;
    await sleep(POLL_MS);
  }
  throw new Error(`nats-server's ${url} did not answer 200 within ${timeoutMs / 1000} s`);
}
