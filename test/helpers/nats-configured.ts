// A nats-server started from a config file the test writes (auth, TLS, a cluster node): the pinned binary, ports the
// server picks itself (`listen: 127.0.0.1:-1`, read back from its ports file), ready when its monitoring endpoint's
// /healthz answers 200 (JetStream up, and current with the meta leader in a cluster).
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { natsServerBinary } from "../../src/setup-env.js";
import { setTimeout as sleep } from "node:timers/promises";

export interface ServerPorts {
  client: number;
  cluster: number | null;
  monitor: number;
}

export interface LaunchedServer {
  child: ChildProcess;
  ports: ServerPorts;
  /** SIGKILL (`signal` otherwise) and wait for the exit */
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Starts `conf` (which should leave `listen`, `http` and `cluster.listen` at -1 or fixed ports) with its store and
 * ports file under `dir`; resolves once the ports are known and, with `healthy`, /healthz answers.
 */
export async function launchServer(dir: string, conf: string, opts: { healthy?: boolean } = {}): Promise<LaunchedServer> {
  const portsDir = join(dir, "ports");
  mkdirSync(portsDir, { recursive: true });
  for (const old of readdirSync(portsDir)) rmSync(join(portsDir, old), { force: true });
  const file = join(dir, "server.conf");
  writeFileSync(file, `ports_file_dir: ${JSON.stringify(portsDir)}\n${conf}\n`);
  let output = "";
  const child = spawn(natsServerBinary(), ["-c", file], { stdio: ["ignore", "pipe", "pipe"] });
  const keep = (c: Buffer) => (output = (output + c.toString()).slice(-4000));
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  let exitCode: number | null = null;
  child.once("exit", (code) => (exitCode = code ?? -1));
  const portsFile = join(portsDir, `${basename(natsServerBinary())}_${child.pid}.ports`);
  let ports: ServerPorts | null = null;
  for (let i = 0; ports === null; i++) {
    if (exitCode !== null) throw new Error(`nats-server (${file}) exited (${exitCode}) at start:\n${output}`);
    try {
      const found = JSON.parse(readFileSync(portsFile, "utf8")) as { nats: string[]; monitoring: string[]; cluster?: string[] };
      const port = (url: string | undefined) => Number(new URL(url ?? "").port);
      ports = { client: port(found.nats[0]), monitor: port(found.monitoring[0]), cluster: found.cluster ? port(found.cluster[0]) : null };
    } catch {
      if (i > 300) throw new Error(`nats-server (${file}) wrote no ports file ${portsFile}:\n${output}`);
      await sleep(50);
    }
  }
  const launched: LaunchedServer = {
    child, ports,
    async kill(signal = "SIGKILL") {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once("exit", r));
      child.kill(signal);
      await exited;
    },
  };
  if (opts.healthy !== false) await waitHealthy(ports.monitor);
  return launched;
}

export async function waitHealthy(monitorPort: number): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (await fetch(`http://127.0.0.1:${monitorPort}/healthz`).then((r) => r.ok, () => false)) return;
    await sleep(100);
  }
  throw new Error(`nats-server with monitoring port ${monitorPort} not healthy after 60 s`);
}
