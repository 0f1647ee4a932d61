// Prometheus metrics (prom-client) and the /metrics + /healthz HTTP endpoint (DESIGN.md data flow step 9).
import { createServer, type Server } from "node:http";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import { Phase, type PpoStats } from "../contract/index.js";

export class Metrics {
  readonly registry = new Registry();
  readonly accepted = new Counter({ name: "rlloop_rollouts_accepted_total", help: "rollouts accepted into a round", registers: [this.registry] });
  readonly acceptedRows = new Counter({ name: "rlloop_rows_accepted_total", help: "decision rows accepted into a round", registers: [this.registry] });
  readonly rejected = new Counter({ name: "rlloop_rollouts_rejected_total", help: "rollouts rejected, by reason", labelNames: ["reason"], registers: [this.registry] });
  readonly rounds = new Counter({ name: "rlloop_rounds_total", help: "committed rounds, by outcome", labelNames: ["outcome"], registers: [this.registry] });
  readonly committedRound = new Gauge({ name: "rlloop_committed_round", help: "last committed round", registers: [this.registry] });
  readonly bufferedRows = new Gauge({ name: "rlloop_buffered_rows", help: "rows in the open round", registers: [this.registry] });
  readonly pendingAcks = new Gauge({ name: "rlloop_pending_acks", help: "messages held unacked", registers: [this.registry] });
  readonly phase = new Gauge({ name: "rlloop_phase", help: "1 for the current phase", labelNames: ["phase"], registers: [this.registry] });
  readonly degraded = new Gauge({ name: "rlloop_degraded", help: "1 while the trainer or its host fails and rounds are retried", registers: [this.registry] });
  readonly lastStat = new Gauge({ name: "rlloop_last_round_stat", help: "last trained round's statistics", labelNames: ["stat"], registers: [this.registry] });
  readonly stepSeconds = new Histogram({
    name: "rlloop_round_step_seconds", help: "duration of round steps", labelNames: ["step"],
    buckets: [0.01, 0.1, 0.5, 1, 5, 15, 60, 300, 1200, 3600], registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: "rlloop_process_" });
  }

  setPhase(current: keyof typeof Phase): void {
    for (const p of Object.keys(Phase)) this.phase.set({ phase: p }, p === current ? 1 : 0);
  }

  setLastStats(stats: PpoStats): void {
    for (const key of ["pg_loss", "kl", "clip_frac", "logp_gap", "logp_gap_abs", "rows", "train_s"] as const) this.lastStat.set({ stat: key }, stats[key]);
  }
}

export interface HealthSource {
  healthy(): { ok: boolean; detail: Record<string, unknown> };
}

/** Listen on host:port (0 = any free port); resolves with the server and the bound port. */
export async function serveMetrics(metrics: Metrics, health: HealthSource, host: string, port: number): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    void (async () => {
      if (req.url === "/metrics") {
        res.writeHead(200, { "content-type": metrics.registry.contentType });
        res.end(await metrics.registry.metrics());
      } else if (req.url === "/healthz") {
        const { ok, detail } = health.healthy();
        res.writeHead(ok ? 200 : 503, { "content-type": "application/json" });
        res.end(JSON.stringify({ ok, ...detail }));
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
