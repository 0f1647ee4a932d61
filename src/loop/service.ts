// The NATS micro service `rlloop` (DESIGN.md data flow step 9): PING/INFO/STATS discovery from the services
// framework, plus `status` (the current stats snapshot) and `rounds` (summaries of the last rounds; RoundsQuery)
// answering JSON on rlloop.<policy>.svc.status / .svc.rounds, and `rollback` (issue 23: RollbackRequest on
// .svc.rollback; answered with the rollback's announcement once the daemon has done it between rounds). The request
// bodies are src/contract/service-requests.ts; errors: 400 for a malformed request, 409 for a rollback the daemon
// refuses, 500 for a failure of its own.
import type { NatsConnection } from "@nats-io/nats-core";
import { Svcm, type Service } from "@nats-io/services";
import type { Logger } from "pino";
import { PACKAGE_VERSION } from "../version.js";
import { z } from "zod";
import { RollbackRequest, RoundsQuery, SERVICE_NAME, subjects, type AdapterRolledBack, type RoundSummary, type StatsEvent } from "../contract/index.js";
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
      const query = parseBody(RoundsQuery, msg.data);
      if (typeof query === "string") return msg.respondError(400, query);
      source.rounds(query.limit).then(
        (rounds) => msg.respond(JSON.stringify(rounds)),
        (cause: Error) => msg.respondError(500, cause.message),
      );
    },
  });
  service.addEndpoint("rollback", {
    subject: names.rollbackRequest,
    handler: (err, msg) => {
      if (err) return log.warn({ err }, "rollback endpoint error");
      const request = parseBody(RollbackRequest, msg.data);
      if (typeof request === "string") return msg.respondError(400, request);
      log.warn({ request }, "rollback requested");
      source.rollback(request.to_round, request.reason ?? "asked by an operator").then(
        (event) => msg.respond(JSON.stringify(event)),
        (cause: Error) => msg.respondError(isRollbackRefused(cause) ? 409 : 500, cause.message),
      );
    },
  });
  return service;
}

/** The request's body as the contract defines it, or what is wrong with it (an empty body: the defaults). */
function parseBody<T extends z.ZodType>(schema: T, data: Uint8Array): z.output<T> | string {
  let body: unknown = {};
  if (data.length > 0) {
    try {
      body = JSON.parse(new TextDecoder().decode(data));
    } catch {
      return "the request body must be JSON";
    }
  }
  const parsed = schema.safeParse(body);
  return parsed.success ? parsed.data : parsed.error.issues.map((i) => `'${i.path.join(".")}': ${i.message}`).join("; ");
}
