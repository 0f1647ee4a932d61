// The daemon's HTTP endpoint (observe.metricsHost:observe.metricsPort): Prometheus /metrics, the probes /livez
// (the process serves: a liveness probe) and /readyz (NATS connected, the trainer started, not stopped or failed, not
// degraded: a readiness probe; /healthz is its alias), and the web UI under observe.ui.path when enabled.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Metrics } from "./metrics.js";

export interface Readiness {
  ready: boolean;
  detail: Record<string, unknown>;
}

export interface HttpRoutes {
  metrics: Metrics;
  readiness(): Readiness;
  /** the UI's handler, when mounted: true when it answered */
  ui?: ((req: IncomingMessage, res: ServerResponse) => boolean) | null;
}

/** Listen on host:port (0 = any free port); resolves with the server and the bound port. */
export async function serveHttp(routes: HttpRoutes, host: string, port: number): Promise<{ server: Server; port: number }> {
  const json = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };
  const server = createServer((req, res) => {
    void (async () => {
      if (routes.ui?.(req, res)) return;
      const path = (req.url ?? "").split("?")[0];
      if (path === "/metrics") {
        res.writeHead(200, { "content-type": routes.metrics.registry.contentType });
        res.end(await routes.metrics.registry.metrics());
      } else if (path === "/livez") {
        json(res, 200, { live: true });
      } else if (path === "/readyz" || path === "/healthz") {
        const { ready, detail } = routes.readiness();
        json(res, ready ? 200 : 503, { ready, ...detail });
      } else {
        res.writeHead(404).end();
      }
    })().catch(() => res.writeHead(500).end());
  });
  await new Promise<void>((resolveListen, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolveListen());
  });
  const address = server.address();
  return { server, port: typeof address === "object" && address ? address.port : port };
}
