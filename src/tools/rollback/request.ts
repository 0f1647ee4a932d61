// `rlloop rollback --to-round N` (issue 23): asks the running daemon, over its micro service's `rollback` endpoint
// (rlloop.<policy>.svc.rollback), to serve and continue round N's adapter again. The daemon does it at its next safe
// point between rounds and answers with the announcement it published on rlloop.<policy>.adapter.rolled_back; so the
// answer may take as long as the round in hand still trains (--timeout-s).
import { AdapterRolledBack, decodeMessage, subjects, type RollbackRequest } from "../../contract/index.js";
import type { Config } from "../../loop/config/index.js";
import { ConfigError } from "../../loop/errors.js";
import { connectForCommand } from "../connect.js";

export interface RollbackFlags {
  config?: string;
  nats?: string;
  policy?: string;
  toRound: number;
  reason?: string;
  timeoutS: number;
}

export async function requestRollback(config: Config, flags: RollbackFlags): Promise<AdapterRolledBack> {
  const policy = flags.policy ?? config.policy.name;
  const nats = await connectForCommand(config, "rlloop-rollback", flags.nats);
  try {
    const request: RollbackRequest = { to_round: flags.toRound, ...(flags.reason ? { reason: flags.reason } : {}) };
    const body = JSON.stringify(request);
    const reply = await nats.nc.request(subjects(policy).rollbackRequest, body, { timeout: flags.timeoutS * 1000 }).catch((cause: Error) => {
      const what = /no responders/i.test(cause.message) ? `no daemon of policy ${policy} answers on ${nats.url}` : `the daemon did not answer within ${flags.timeoutS} s (a rollback waits for the round in hand; it may still happen: watch ${subjects(policy).adapterRolledBack})`;
      throw new Error(what, { cause });
    });
    const code = reply.headers?.get("Nats-Service-Error-Code");
    if (code) {
      const message = reply.headers?.get("Nats-Service-Error") ?? "";
      // 400 and 409: what was asked cannot be done (a round with nothing kept to continue, the one served already)
      if (code === "400" || code === "409") throw new ConfigError(`rollback refused: ${message}`);
      throw new Error(`the daemon failed the rollback (${code}): ${message}`);
    }
    return AdapterRolledBack.parse(decodeMessage(reply.string()));
  } finally {
    await nats.nc.drain().catch(() => {});
  }
}
