// The web UI inside another process's HTTP server (the daemon's /metrics server): one call gives a node:http
// request handler for the page under a base path, reading the loop from the given NATS connection as `rlloop ui`
// does (source.ts). The caller routes requests to it first and stops it when it stops serving:
//
//   const ui = await mountUi(nc, { policy, source: url, basePath: "/ui/", host: metricsHost, token });
//   createServer((req, res) => { if (ui.handle(req, res)) return; /* /metrics, /healthz, 404 */ });
//   ...
//   await ui.stop();
import type { NatsConnection } from "@nats-io/nats-core";
import { isLoopbackHost, LOOPBACK_HOSTS } from "./access.js";
import type { UiAsset } from "./assets.js";
import { uiHandler, type UiRequestHandler } from "./server.js";
import { startUiSource, type UiSourceOptions } from "./source.js";

export interface MountUiOptions extends UiSourceOptions {
  /** where the page lives in the host server, with leading and trailing slash (default "/ui/") */
  basePath?: string;
  /** the address the host server listens on: on loopback, only loopback host names are answered (access.ts) */
  host: string;
  /** when set, every request must carry it */
  token?: string | null;
  /** the built page (default: dist/ui) */
  assets?: Map<string, UiAsset>;
}

export interface MountedUi {
  handle: UiRequestHandler;
  /** resolves once the loop's stored history is read (the page says "reading the loop's history" until then) */
  caughtUp: Promise<void>;
  /** ends the page's event streams and stops reading NATS (the connection stays the caller's) */
  stop(): Promise<void>;
}

export async function mountUi(nc: NatsConnection, options: MountUiOptions): Promise<MountedUi> {
  const { basePath = "/ui/", host, token = null, assets, ...sourceOptions } = options;
  const source = await startUiSource(nc, sourceOptions);
  let handle: UiRequestHandler;
  try {
    handle = uiHandler({
      store: source.store, basePath, token, allowedHosts: isLoopbackHost(host) ? LOOPBACK_HOSTS : null, ...(assets ? { assets } : {}),
    });
  } catch (err) {
    await source.stop(); // the page's assets missing, for instance: its readers must not outlive the failure
    throw err;
  }
  return {
    handle,
    caughtUp: source.caughtUp,
    async stop() {
      handle.close();
      await source.stop();
    },
  };
}
