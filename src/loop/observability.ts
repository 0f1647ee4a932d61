// What monitors see of a running daemon (docs/operations.md): the NATS service (status, rounds, rollback), the HTTP
// endpoint (/metrics, /livez, /readyz and the web dashboard) and the periodic stats event. One component owns them so
// the daemon starts and stops them as one; what the endpoints report comes from the daemon through ObservedLoop.
import type { Server } from "node:http";
import type { Service } from "@nats-io/services";
import { logger } from "../log.js";
import { EVENT_STREAM, ROLLOUT_STREAM } from "../contract/index.js";
import type { MountedUi } from "../tools/ui/mount.js";
import { redactUrl } from "./config/index.js";
import type { LoopContext } from "./context.js";
import { ConfigError } from "./errors.js";
import { serveHttp, type Readiness } from "./http-server.js";
import { startService, type ServiceSource } from "./service.js";
import type { ConsumerState } from "./intake.js";
import { StatsTicker } from "./stats.js";

/** The daemon as its monitors read it. */
export interface ObservedLoop extends ServiceSource {
  readiness(): Readiness;
  /** the consumer by the server's count, null while unknown (the stats ticker folds its ack floor into the context
   *  and its pending count into the metrics) */
  consumer(): Promise<ConsumerState | null>;
}

export class Observability {
  /** bound port of the HTTP endpoint (null when observe.metricsPort is off) */
  metricsPort: number | null = null;
  #service: Service | null = null;
  #http: Server | null = null;
  #ui: MountedUi | null = null;
  #ticker: StatsTicker | null = null;

  private constructor(
    private readonly ctx: LoopContext,
    private readonly loop: ObservedLoop,
  ) {}

  /** Starts every part; a part that fails to start stops the ones before it. */
  static async start(ctx: LoopContext, loop: ObservedLoop, natsUrl: string): Promise<Observability> {
    const observability = new Observability(ctx, loop);
    try {
      await observability.#start(natsUrl);
    } catch (err) {
      await observability.stop();
      throw err;
    }
    return observability;
  }

  /** rows/s accepted over the last stats interval */
  get rate(): number {
    return this.#ticker?.rate ?? 0;
  }

  /** Stops every part that started; never rejects (a stop must not hide the failure that led to it). */
  async stop(): Promise<void> {
    this.#ticker?.stop();
    await this.#service?.stop().catch(() => {});
    await this.#ui?.stop().catch(() => {});
    const http = this.#http;
    if (http) await new Promise<void>((r) => http.close(() => r()));
  }

  async #start(natsUrl: string): Promise<void> {
    const { ctx, loop } = this;
    ctx.metrics.committedRound.set(ctx.state.record.round);
    this.#service = await startService(ctx.nats.nc, ctx.policy, loop, logger("service"));
    const { metricsPort, metricsHost, ui } = ctx.config.observe;
    if (metricsPort !== null) {
      this.#ui = ui.enabled ? await mountUi(ctx, natsUrl) : null;
      const { server, port } = await serveHttp({ metrics: ctx.metrics, readiness: () => loop.readiness(), ui: this.#ui?.handle ?? null }, metricsHost, metricsPort);
      this.#http = server;
      this.metricsPort = port;
    }
    this.#ticker = new StatsTicker(ctx, () => loop.snapshot(), async () => {
      ctx.metrics.roundEventsUnpublished.set(ctx.events.unpublished);
      for (const stream of [ROLLOUT_STREAM, EVENT_STREAM]) {
        const info = await ctx.nats.jsm.streams.info(stream).catch(() => null); // NATS away: the next tick reads it
        if (info) ctx.metrics.streamBytes.set({ stream }, info.state.bytes);
      }
      const consumer = await loop.consumer();
      if (consumer === null) return;
      ctx.ackFloor = Math.max(ctx.ackFloor, consumer.ackFloor);
      ctx.metrics.consumerAckPending.set(consumer.ackPending);
      ctx.metrics.consumerMaxAckPending.set(consumer.maxAckPending);
    });
  }
}

/** The web dashboard on the HTTP endpoint (observe.ui), reading the daemon's own NATS connection. */
async function mountUi(ctx: LoopContext, natsUrl: string): Promise<MountedUi> {
  const config = ctx.config;
  const { metricsHost, ui } = config.observe;
  const { isLoopbackHost } = await import("../tools/ui/access.js");
  if (ui.token === null && !isLoopbackHost(metricsHost)) {
    throw new ConfigError(`'observe.ui.token' must be set when observe.metricsHost (${metricsHost}) is not loopback: the page would be open to the network`);
  }
  const { mountUi: mount } = await import("../tools/ui/mount.js");
  return mount(ctx.nats.nc, {
    policy: ctx.policy, source: redactUrl(natsUrl), host: metricsHost, basePath: ui.path, token: ui.token,
    roundRows: config.round.rows, statsIntervalS: config.observe.statsIntervalS,
  });
}
