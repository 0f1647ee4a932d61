// `rlloop demo --ui`: the web dashboard beside the demo. The demo's daemon runs its own nats-server, whose address
// it writes into its work dir once started; the dashboard waits for it, reads the loop from there while the demo
// plays its rounds, and keeps serving the final state after the demo has stopped its loop, until Ctrl-C.
import { setTimeout as sleep } from "node:timers/promises";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { runningOwnServerUrl } from "../../loop/nats-server.js";
import { loadUiAssets } from "./assets.js";
import { startUiServer, type UiServer } from "./server.js";
import { startUiSource, type UiSource } from "./source.js";

export interface DemoUiOptions {
  /** the demo loop's workDir (`<--work>/loop`), where its nats-server writes its address */
  workDir: string;
  policy: string;
  port: number;
  rowsPerRound: number;
  /** the demo itself: waiting for its server ends when it does */
  demo: Promise<unknown>;
}

export interface DemoUi {
  /** the demo is over: say so on the page, then serve it until SIGINT/SIGTERM */
  afterDemo(): Promise<void>;
}

const POLL_MS = 250;

export async function serveDemoUi(o: DemoUiOptions): Promise<DemoUi> {
  const assets = loadUiAssets();
  let over = false;
  o.demo.then(() => (over = true), () => (over = true));
  let url: string | null = null;
  // the demo removes an earlier run's loop folder before it starts, so an address found here is this run's
  while (!over && (url = runningOwnServerUrl(o.workDir)) === null) await sleep(POLL_MS);
  if (url === null) return { afterDemo: async () => {} };

  const nc: NatsConnection = await connect({ servers: url, name: "rlloop-ui", maxReconnectAttempts: -1, reconnectTimeWait: 500 });
  const source: UiSource = await startUiSource(nc, { policy: o.policy, source: url, roundRows: o.rowsPerRound });
  const server: UiServer = await startUiServer({ store: source.store, port: o.port, assets });
  process.stdout.write(`rlloop ui: the demo's loop at ${server.url}\n`);
  return {
    async afterDemo() {
      await source.stop("the demo is over and its loop stopped: this is its final state");
      await nc.close().catch(() => {});
      process.stdout.write(`rlloop ui: the final state stays at ${server.url} (Ctrl-C exits)\n`);
      await new Promise<void>((done) => {
        process.once("SIGINT", () => done());
        process.once("SIGTERM", () => done());
      });
      await server.close();
    },
  };
}
