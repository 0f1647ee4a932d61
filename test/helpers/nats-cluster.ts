// A real 3-node JetStream cluster on loopback for tests: each node a nats-server of its own config
// (nats-configured.ts: temp store, random ports chosen by the server itself, ready on /healthz). After the first start every
// node's ports are fixed in its config, so a node killed with SIGKILL comes back on the same ports and store, as a
// restarted cluster member does.
import type { ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { JetStreamManager } from "@nats-io/jetstream";
import { launchServer, waitHealthy } from "./nats-configured.js";
import { setTimeout as sleep } from "node:timers/promises";

export interface ClusterNode {
  name: string;
  url: string;
  alive: boolean;
}

export interface NatsCluster {
  /** every node's client URL, comma-separated (as nats.url takes them) */
  url: string;
  nodes: ClusterNode[];
  /** the node that leads `stream` (a stream, `KV_<bucket>`, `OBJ_<bucket>`) */
  leaderOf(jsm: JetStreamManager, stream: string): Promise<string>;
  /** SIGKILL one node (its store is kept) */
  kill(name: string): Promise<void>;
  /** start a killed node again on its ports and store; resolves when it is healthy */
  restart(name: string): Promise<void>;
  /** every live node healthy */
  healthy(): Promise<void>;
  stop(): Promise<void>;
}

interface Node extends ClusterNode {
  dir: string;
  child: ChildProcess | null;
  ports: { client: number; cluster: number; monitor: number } | null;
}

const CLUSTER = "rlloop-test";

export async function startNatsCluster(size = 3): Promise<NatsCluster> {
  const root = mkdtempSync(join(tmpdir(), "rlloop-cluster-"));
  const nodes: Node[] = Array.from({ length: size }, (_, i) => {
    const dir = join(root, `n${i}`);
    mkdirSync(dir, { recursive: true });
    return { name: `n${i}`, url: "", alive: false, dir, child: null, ports: null };
  });
  const [seed, ...rest] = nodes as [Node, ...Node[]];
  // the first node picks its ports; the others route to it, and gossip makes the mesh. A JetStream cluster node
  // refuses to start without a route: the first one gets one to a port nothing listens on until it is restarted.
  await launch(seed, config(seed, null, [1]), false);
  await Promise.all(rest.map((n) => launch(n, config(n, null, [seed.ports!.cluster]), false)));
  // from now on every node has fixed ports and routes to all others, so any of them can come back after a kill
  for (const n of nodes) writeFileSync(join(n.dir, "node.conf"), config(n, n.ports, nodes.filter((o) => o !== n).map((o) => o.ports!.cluster)));

  const cluster: NatsCluster = {
    url: nodes.map((n) => n.url).join(","),
    nodes,
    async leaderOf(jsm, stream) {
      for (let i = 0; i < 200; i++) {
        const leader = (await jsm.streams.info(stream).catch(() => null))?.cluster?.leader;
        if (leader) return leader;
        await sleep(100);
      }
      throw new Error(`no leader of ${stream}`);
    },
    async kill(name) {
      const node = byName(nodes, name);
      const child = node.child;
      if (!child) return;
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGKILL");
      await exited;
      node.child = null;
      node.alive = false;
    },
    async restart(name) {
      const node = byName(nodes, name);
      await launch(node, readFileSync(join(node.dir, "node.conf"), "utf8"));
    },
    async healthy() {
      await Promise.all(nodes.filter((n) => n.alive).map((n) => waitHealthy(n.ports!.monitor)));
    },
    async stop() {
      for (const n of nodes) await cluster.kill(n.name);
      rmSync(root, { recursive: true, force: true });
    },
  };
  await cluster.healthy();
  return cluster;
}

function byName(nodes: Node[], name: string): Node {
  const node = nodes.find((n) => n.name === name);
  if (!node) throw new Error(`no cluster node ${name}`);
  return node;
}

/** A node's config: ports -1 (the server picks) or fixed, routes to other nodes' cluster ports. */
function config(n: Node, ports: Node["ports"], routes: number[]): string {
  return [
    `server_name: ${n.name}`,
    `listen: 127.0.0.1:${ports?.client ?? -1}`,
    `http: 127.0.0.1:${ports?.monitor ?? -1}`,
    `jetstream { store_dir: ${JSON.stringify(join(n.dir, "store"))} }`,
    `cluster {`,
    `  name: ${CLUSTER}`,
    `  listen: 127.0.0.1:${ports?.cluster ?? -1}`,
    `  routes: [${routes.map((p) => `nats-route://127.0.0.1:${p}`).join(", ")}]`,
    `}`,
  ].join("\n");
}

/** Starts the node (waiting for /healthz unless the cluster is still forming). */
async function launch(n: Node, conf: string, healthy = true): Promise<void> {
  const server = await launchServer(n.dir, conf, { healthy });
  n.child = server.child;
  n.ports = { client: server.ports.client, cluster: server.ports.cluster ?? 0, monitor: server.ports.monitor };
  n.url = `nats://127.0.0.1:${n.ports.client}`;
  n.alive = true;
}
