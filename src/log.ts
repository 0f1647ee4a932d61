// The root pino logger (JSON lines on stdout) and per-component children. Credentials are redacted by path so a
// logged config, connection option or error never carries a password, token, nkey seed or TLS key.
import { pino, type DestinationStream, type Logger, type LevelWithSilent } from "pino";

/** Paths pino replaces with "[redacted]" wherever these keys appear up to three levels deep. */
const SECRET_KEYS = ["pass", "password", "token", "nkey", "seed", "creds", "credsFile", "key", "authorization"];
const REDACT_PATHS = SECRET_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`, `*.*.*.${k}`]);

let root: Logger = createRootLogger((process.env.RLLOOP_LOG_LEVEL as LevelWithSilent | undefined) ?? "info");

/** `destination` defaults to stdout (synchronous, so a line logged right before a crash is not lost). */
export function createRootLogger(level: LevelWithSilent, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { pid: process.pid },
    redact: { paths: REDACT_PATHS, censor: "[redacted]" },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  // pino's own default stdout stream is asynchronous (sonic-boom, sync off): lines could land after later plain
  // writes to stdout (the demo's table) or be lost in a crash; ask for the synchronous one the comment promises.
  return pino(options, destination ?? pino.destination({ dest: 1, sync: true }));
}

/** Replace the root logger's level (the daemon sets it from config.log.level). */
export function setLogLevel(level: LevelWithSilent): void {
  root.level = level;
}

/** Child logger bound to a component name, e.g. logger("intake"). */
export function logger(component: string, bindings: Record<string, unknown> = {}): Logger {
  return root.child({ component, ...bindings });
}

/** For tests: route logs elsewhere. */
export function setRootLogger(next: Logger): void {
  root = next;
}
