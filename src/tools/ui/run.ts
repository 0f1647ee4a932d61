// The body of `rlloop ui`: connect as the operator commands do (--nats, else config nats.url, else the daemon's own
// server), read the loop into a store (source.ts), serve it (server.ts) until SIGINT/SIGTERM.
import { registerSecrets } from "../../redact.js";
import { loadConfig } from "../../loop/config/index.js";
import { connectForCommand } from "../connect.js";
import { untilSignal } from "../until-signal.js";
import { isLoopbackHost } from "./access.js";
import { loadUiAssets } from "./assets.js";
import { startUiServer } from "./server.js";
import { startUiSource } from "./source.js";

/** `rlloop ui`'s options (src/cli/ui.ts). */
export interface UiFlags {
  config?: string;
  nats?: string;
  policy?: string;
  host: string;
  port: number;
  token?: string;
  rewardHistory: number;
  timeoutS: number;
}

/** The port the page is served on unless --port says otherwise (beside the daemon's metrics default, 9464). */
export const DEFAULT_UI_PORT = 9465;

export async function runUi(flags: UiFlags): Promise<void> {
  const config = loadConfig(flags.config === undefined ? {} : { file: flags.config });
  const policy = flags.policy ?? config.policy.name;
  const token = flags.token ?? process.env.RLLOOP_UI_TOKEN ?? null;
  registerSecrets(token);
  // before connecting: a missing build is the likelier mistake and needs no NATS to report
  const assets = loadUiAssets();
  const nats = await connectForCommand(config, "rlloop-ui", flags.nats);
  try {
    const source = await startUiSource(nats.nc, {
      policy, source: nats.url, rewardHistory: flags.rewardHistory, requestTimeoutMs: flags.timeoutS * 1000,
      roundRows: config.round.rows, statsIntervalS: config.observe.statsIntervalS,
    });
    try {
      const server = await startUiServer({ store: source.store, host: flags.host, port: flags.port, token, assets });
      // listening before the ready line: whoever starts the command may stop it as soon as it reads that line
      const signalled = untilSignal();
      process.stdout.write(`rlloop ui: policy ${policy} from ${nats.url} at ${server.url}${token === null ? "" : "?token=<token>"} (Ctrl-C stops)\n`);
      if (!isLoopbackHost(flags.host) && token === null) {
        process.stderr.write(`rlloop ui: warning: listening on ${flags.host} without a token; anyone who reaches this port can read the page (--token or RLLOOP_UI_TOKEN)\n`);
      }
      await signalled;
      await stopStep("the HTTP server to close", () => server.close());
    } finally {
      // also when the server could not start (its port taken): no reader outlives the command
      await stopStep("the NATS readers to stop", () => source.stop());
    }
  } finally {
    await stopStep("the NATS connection to drain", () => nats.nc.drain().catch(() => {}));
  }
}

/** A stop step slower than this says which one it is (a second Ctrl-C still ends the command at once). */
const STOP_NOTICE_MS = 5000;

/** One step of the shutdown; one that hangs names itself on stderr instead of leaving a silent process. */
async function stopStep<T>(what: string, step: () => Promise<T>): Promise<T> {
  const notice = setTimeout(() => process.stderr.write(`rlloop ui: stopping: still waiting for ${what}\n`), STOP_NOTICE_MS);
  notice.unref();
  try {
    return await step();
  } finally {
    clearTimeout(notice);
  }
}

