// The body of `rlloop watch`: the thin terminal loop around the pure renderer. Alternate screen, clear + redraw on
// every change (at most every 100 ms) and every --refresh ms; SIGINT/SIGTERM restore the terminal and return.
import { loadConfig } from "../../loop/config/index.js";
/** `rlloop watch`'s options (src/cli/watch.ts). */
export interface WatchFlags {
  config?: string;
  nats?: string;
  policy?: string;
  once: boolean;
  rounds: number;
  timeoutS: number;
  refreshS: number;
}
import { connectForCommand } from "../connect.js";
import { renderWatch } from "./watch-view.js";
import { queryService, startWatcher, type Watcher } from "./watcher.js";
import type { WatchState } from "./watch-state.js";
import { untilSignal } from "../until-signal.js";

const ENTER = "\x1b[?1049h\x1b[?25l"; // alternate screen, hide cursor
const LEAVE = "\x1b[?25h\x1b[?1049l";
const CLEAR = "\x1b[H\x1b[2J";
const MIN_REDRAW_MS = 100;

export async function runWatch(flags: WatchFlags): Promise<void> {
  const config = loadConfig(flags.config === undefined ? {} : { file: flags.config });
  const policy = flags.policy ?? config.policy.name;
  const nats = await connectForCommand(config, "rlloop-watch", flags.nats);
  const watcherOpts = { policy, source: nats.url, maxRounds: flags.rounds, requestTimeoutMs: flags.timeoutS * 1000 };
  const frame = (state: WatchState) =>
    renderWatch(state, { nowMs: Date.now(), width: process.stdout.columns ?? 120, statsIntervalS: config.observe.statsIntervalS });
  try {
    if (flags.once) {
      process.stdout.write(frame(await queryService(nats.nc, watcherOpts)));
      return;
    }
    await liveView(nats.nc, watcherOpts, frame, flags.refreshS * 1000);
  } finally {
    await nats.nc.drain().catch(() => {});
  }
}

async function liveView(
  nc: Parameters<typeof startWatcher>[0], opts: Parameters<typeof startWatcher>[1], frame: (s: WatchState) => string, refreshMs: number,
): Promise<void> {
  const out = process.stdout;
  let watcher: Watcher | null = null;
  let pending: NodeJS.Timeout | null = null;
  let lastDraw = 0;
  const draw = () => {
    pending = null;
    lastDraw = Date.now();
    if (watcher) out.write(CLEAR + frame(watcher.state()));
  };
  const schedule = () => {
    pending ??= setTimeout(draw, Math.max(0, lastDraw + MIN_REDRAW_MS - Date.now()));
  };
  // listening before the screen is taken: a Ctrl-C while the watcher still asks the service (up to its timeout)
  // must give the terminal back, not leave it in the alternate screen with the cursor hidden
  const signalled = untilSignal();
  out.write(ENTER);
  try {
    const started = startWatcher(nc, opts, schedule);
    const first = await Promise.race([started, signalled.then(() => null)]);
    if (first === null) {
      void started.then((w) => w.stop(), () => {});
      return;
    }
    watcher = first;
    const ticker = setInterval(draw, refreshMs);
    draw();
    await signalled;
    clearInterval(ticker);
    if (pending) clearTimeout(pending);
    await watcher.stop();
  } finally {
    out.write(LEAVE);
  }
}

