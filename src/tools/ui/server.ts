// HTTP side of the web UI: a request handler usable inside any node:http server (the daemon mounts it beside
// /metrics) and a standalone listener for `rlloop ui`. Under its base path it answers
//   GET ./                 the page (index.html; hashed assets under ./assets/ are cached forever)
//   GET ./api/snapshot     the whole view model as JSON (scripts, the load bench)
//   GET ./api/events       Server-Sent Events: `snapshot` (the whole view model), then `patch` per change
// Read-only: no request changes anything. The page and this file only see the view model (model.ts).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { checkAccess, isLoopbackHost, LOOPBACK_HOSTS } from "./access.js";
import { loadUiAssets, type UiAsset } from "./assets.js";
import { encodeView } from "./view-codec.js";
import type { UiStore } from "./store.js";

export interface UiHandlerOptions {
  store: UiStore;
  /** the built page (default: dist/ui, read once) */
  assets?: Map<string, UiAsset>;
  /** path the page is served under, with leading and trailing slash (default "/") */
  basePath?: string;
  /** when set, every request must carry it (access.ts) */
  token?: string | null;
  /** host names accepted in the Host header, null = any (default: any) */
  allowedHosts?: readonly string[] | null;
  /** SSE comment sent this often so proxies keep the stream open (default 15 s) */
  heartbeatMs?: number;
}

/** Handles the request when its path is under the base path (returns true), else leaves it alone (false). */
export interface UiRequestHandler {
  (req: IncomingMessage, res: ServerResponse): boolean;
  /** ends the open event streams */
  close(): void;
}

// The page loads nothing from elsewhere, so the policy allows nothing from elsewhere. uPlot sets inline styles
// through the CSSOM (element.style), which style-src does not govern.
const SECURITY_HEADERS = {
  "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
};

export function uiHandler(options: UiHandlerOptions): UiRequestHandler {
  const { store } = options;
  const basePath = options.basePath ?? "/";
  if (!basePath.startsWith("/") || !basePath.endsWith("/")) throw new TypeError(`basePath must start and end with "/", got ${JSON.stringify(basePath)}`);
  const assets = options.assets ?? loadUiAssets();
  const access = { token: options.token ?? null, allowedHosts: options.allowedHosts ?? null, basePath };
  const streams = new Set<ServerResponse>();
  const heartbeatMs = options.heartbeatMs ?? 15_000;

  const handler = ((req: IncomingMessage, res: ServerResponse): boolean => {
    const url = new URL(req.url ?? "/", "http://ui.invalid");
    if (url.pathname === basePath.slice(0, -1) && basePath !== "/") {
      res.writeHead(308, { location: basePath + url.search }).end();
      return true;
    }
    if (!url.pathname.startsWith(basePath)) return false;
    const path = url.pathname.slice(basePath.length);
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { allow: "GET, HEAD", ...SECURITY_HEADERS }).end();
      return true;
    }
    const allowed = checkAccess(req, url, access);
    if (!allowed.ok) {
      res.writeHead(allowed.status, { "content-type": "text/plain; charset=utf-8", ...SECURITY_HEADERS }).end(`${allowed.message}\n`);
      return true;
    }
    if (allowed.setCookie !== null && path === "") {
      // keep the token out of the address bar, the history and screenshots
      url.searchParams.delete("token");
      res.writeHead(303, { location: url.pathname + url.search, "set-cookie": allowed.setCookie, ...SECURITY_HEADERS }).end();
      return true;
    }
    const extra: Record<string, string> = allowed.setCookie === null ? {} : { "set-cookie": allowed.setCookie };
    if (path === "api/events") openStream(req, res, extra);
    else if (path === "api/snapshot") send(res, 200, "application/json", encodeView(store.snapshot()), { "cache-control": "no-store", ...extra });
    else {
      const asset = assets.get(path === "" ? "index.html" : path);
      if (!asset) send(res, 404, "text/plain; charset=utf-8", "not found\n", extra);
      else send(res, 200, asset.type, req.method === "HEAD" ? "" : asset.body, { "cache-control": asset.immutable ? "public, max-age=31536000, immutable" : "no-cache", ...extra });
    }
    return true;
  }) as UiRequestHandler;

  const openStream = (req: IncomingMessage, res: ServerResponse, extra: Record<string, string>) => {
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-store", "x-accel-buffering": "no", ...SECURITY_HEADERS, ...extra,
    });
    // the snapshot and the subscription are taken together: the store flushes pending changes to the other
    // streams first, so this one gets every later change exactly once
    res.write(`retry: 2000\nevent: snapshot\ndata: ${encodeView(store.snapshot())}\n\n`);
    const unsubscribe = store.subscribe((patch) => res.write(`event: patch\ndata: ${encodeView(patch)}\n\n`));
    const heartbeat = setInterval(() => res.write(": heartbeat\n\n"), heartbeatMs);
    heartbeat.unref();
    streams.add(res);
    const end = () => {
      clearInterval(heartbeat);
      unsubscribe();
      streams.delete(res);
    };
    req.once("close", end);
    res.once("close", end);
  };

  handler.close = () => {
    for (const res of [...streams]) res.end();
  };
  return handler;
}

function send(res: ServerResponse, status: number, type: string, body: string | Buffer, headers: Record<string, string>): void {
  res.writeHead(status, { "content-type": type, ...SECURITY_HEADERS, ...headers }).end(body);
}

export interface UiServerOptions {
  store: UiStore;
  /** default 127.0.0.1 */
  host?: string;
  /** 0 = any free port */
  port: number;
  token?: string | null;
  assets?: Map<string, UiAsset>;
}

export interface UiServer {
  server: Server;
  port: number;
  /** the page's address (without the token) */
  url: string;
  close(): Promise<void>;
}

/** `rlloop ui`'s own server. Bound to loopback, it answers to loopback host names only (access.ts says why). */
export async function startUiServer(options: UiServerOptions): Promise<UiServer> {
  const host = options.host ?? "127.0.0.1";
  const handler = uiHandler({
    store: options.store, token: options.token ?? null, ...(options.assets ? { assets: options.assets } : {}),
    allowedHosts: isLoopbackHost(host) ? LOOPBACK_HOSTS : null,
  });
  const server = createServer((req, res) => {
    if (!handler(req, res)) res.writeHead(404).end();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const shown = host.includes(":") ? `[${host}]` : host;
  return {
    server, port, url: `http://${shown}:${port}/`,
    async close() {
      handler.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
