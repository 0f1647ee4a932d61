// The root pino logger and per-component children. JSON lines for machines (the default when stdout is not a
// terminal, or with RLLOOP_LOG_FORMAT=json / --log-format json), a readable line per event on a terminal
// (pino-pretty), or JSON lines appended to RLLOOP_LOG_FILE (the demo's log; rank processes inherit it). Every line goes through src/redact.ts: no password, token, nkey seed, trainer environment value or
// URL credential reaches a log.
import { pino, type DestinationStream, type Logger, type LevelWithSilent } from "pino";
import pretty from "pino-pretty";
import { scrub, scrubValue } from "./redact.js";

export type LogFormat = "json" | "pretty";

/** The format of this process's log: RLLOOP_LOG_FORMAT, else pretty on a terminal, else JSON (always JSON into a
 *  log file). */
export function defaultLogFormat(env: NodeJS.ProcessEnv = process.env, tty = process.stdout.isTTY === true): LogFormat {
  if (env.RLLOOP_LOG_FILE) return "json";
  const asked = env.RLLOOP_LOG_FORMAT;
  if (asked === "json" || asked === "pretty") return asked;
  return tty ? "pretty" : "json";
}

let root: Logger = createRootLogger((process.env.RLLOOP_LOG_LEVEL as LevelWithSilent | undefined) ?? "info");

/**
 * `destination` defaults to stdout, written synchronously (a line logged right before a crash is not lost, and lines
 * keep their order with plain writes to stdout such as the demo's table).
 */
export function createRootLogger(level: LevelWithSilent, destination?: DestinationStream, format: LogFormat = defaultLogFormat()): Logger {
  const options = {
    level,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { log: (object: Record<string, unknown>) => scrubValue(object) as Record<string, unknown> },
    hooks: {
      logMethod(this: Logger, args: unknown[], method: (...a: unknown[]) => void) {
        method.apply(this, args.map((a) => (typeof a === "string" ? scrub(a) : a)));
      },
    },
  };
  const file = process.env.RLLOOP_LOG_FILE;
  const stream = destination ?? (file
    ? pino.destination({ dest: file, sync: true, append: true, mkdir: true })
    : format === "pretty"
      ? pretty({ sync: true, colorize: process.stdout.isTTY === true, translateTime: "SYS:HH:MM:ss.l", ignore: "pid,hostname", singleLine: true })
      : pino.destination({ dest: 1, sync: true }));
  return pino(options, stream);
}

/** Replace the root logger's level (the daemon sets it from config.log.level). */
export function setLogLevel(level: LevelWithSilent): void {
  root.level = level;
}

/** Replace the root logger's format (the CLI's --log-format), keeping its level. */
export function setLogFormat(format: LogFormat): void {
  process.env.RLLOOP_LOG_FORMAT = format; // child processes (rank processes) log the same way
  root = createRootLogger(root.level as LevelWithSilent, undefined, format);
}

/** Every later line, this process's and its child processes' (rank processes), goes to `file` as JSON lines. */
export function setLogFile(file: string): void {
  process.env.RLLOOP_LOG_FILE = file;
  root = createRootLogger(root.level as LevelWithSilent);
}

/** Child logger bound to a component name, e.g. logger("intake"). */
export function logger(component: string, bindings: Record<string, unknown> = {}): Logger {
  return root.child({ component, ...bindings });
}

/** For tests: route logs elsewhere. */
export function setRootLogger(next: Logger): void {
  root = next;
}
