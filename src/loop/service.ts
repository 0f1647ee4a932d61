// The NATS micro service `rlloop` (DESIGN.md data flow step 9): PING/INFO/STATS discovery from the services
// framework, plus `status` (the current stats snapshot) and `rounds` (summaries of the last rounds; request body
// {"limit": n}, default 20) answering JSON on rlloop.<policy>.svc.status / .svc.rounds, and `rollback` (issue 23:
// request {"to_round": n, "reason"?: text} on .svc.rollback; answered with the rollback's announcement once the daemon
// has done it between rounds, or an error: 400 for a malformed request, 409 for one the daemon refuses).
import type { NatsConnection } from "@nats-io/nats-core";
import { Svcm, type Service } from "@nats-io/services";
import type { Logger } from "pino";
import { PACKAGE_VERSION } from "../version.js";
import { SERVICE_NAME, subjects, type AdapterRolledBack, type RoundSummary, type StatsEvent } from "../contract/index.js";
import { isRollbackRefused } from "./rollback.js";

export interface ServiceSource {
  snapshot(): StatsEvent;
  rounds(limit: number): Promise<RoundSummary[]>;
  rollback(toRound: number, reason: string): Promise<AdapterRolledBack>;
}


export async function startService(nc: NatsConnection, policy: string, source: ServiceSource, log: Logger): Promise<Service> {
  // @nats-io/services 3.0.0-25 pins its own nats-core; the connection object is the same protocol client
  const service = await new Svcm(nc as unknown as ConstructorParameters<typeof Svcm>[0]).add({
    name: SERVICE_NAME,
    version: PACKAGE_VERSION,
    description: "rlloop daemon: JetStream rollouts to PPO rounds to published adapters",
    metadata: { policy },
    // each policy's daemon answers its own endpoints; no queue group needed
    queue: "",
  });
  const names = subjects(policy);
  service.addEndpoint("status", {
    subject: names.status,
    handler: (err, msg) => {
      if (err) return log.warn({ err }, "status endpoint error");
      msg.respond(JSON.stringify(source.snapshot()));
    },
  });
  service.addEndpoint("rounds", {
    subject: names.roundsQuery,
    handler: (err, msg) => {
      if (err) return log.warn({ err }, "rounds endpoint error");
      const limit = parseLimit(msg.data);
      source.rounds(limit).then(
        (rounds) => msg.respond(JSON.stringify(rounds)),
        (cause: Error) => msg.respondError(500, cause.message),
      );
    },
  });
  service.addEndpoint("rollback", {
    subject: names.rollbackRequest,
    handler: (err, msg) => {
      if (err) return log.warn({ err }, "rollback endpoint error");
      const request = parseRollback(msg.data);
      if (typeof request === "string") return msg.respondError(400, request);
      log.warn({ request }, "rollback requested");
      source.rollback(request.toRound, request.reason).then(
        (event) => msg.respond(JSON.stringify(event)),
        (cause: Error) => msg.respondError(isRollbackRefused(cause) ? 409 : 500, cause.message),
      );
    },
  });
  return service;
}

/** {"to_round": n, "reason"?: text}, or what is wrong with it. */
function parseRollback(data: Uint8Array): { toRound: number; reason: string } | string {
  let body: { to_round?: unknown; reason?: unknown };
  try {
    body = JSON.parse(new TextDecoder().decode(data)) as typeof body;
  } catch {
    return "the request must be JSON {\"to_round\": n, \"reason\"?: text}";
  }
  const to = body?.to_round;
  if (typeof to !== "number" || !Number.isInteger(to) || to < 0) return `'to_round' must be an integer >= 0, got ${JSON.stringify(to)}`;
  const reason = typeof body.reason === "string" && body.reason.trim() !== "" ? body.reason.slice(0, 500) : "asked by an operator";
  return { toRound: to, reason };
}

function parseLimit(data: Uint8Array): number {
  try {
    const limit = (JSON.parse(new TextDecoder().decode(data)) as { limit?: unknown }).limit;
    return typeof limit === "number" && Number.isInteger(limit) && limit > 0 ? Math.min(limit, 1000) : 20;
  } catch {
    return 20;
  }
}
