// The retries of a step that must eventually succeed (src/loop/retry.ts): the daemon's stop ends them, cutting the
// wait between two attempts short (up to 15 s), so a stop during a NATS outage does not wait for the outage's end;
// and a stop never keeps an attempt from running or its success from being used (a drain lets the round in hand
// reach its commit: a finished training must not be thrown away).
import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { isStopRequested } from "../src/loop/errors.js";
import { retrying } from "../src/loop/retry.js";

const log = pino({ level: "silent" });

describe("loop - retrying a step", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("retries until the step succeeds", async () => {
    let attempts = 0;
    expect(await retrying(async () => (++attempts < 3 ? Promise.reject(new Error("down")) : "done"), { what: "step", log })).toBe("done");
    expect(attempts).toBe(3);
  });

  it("a stop before or during a step lets it run and returns its success", async () => {
    const before = new AbortController();
    before.abort();
    expect(await retrying(async () => "done", { what: "step", log, stop: before.signal })).toBe("done");
    const during = new AbortController();
    expect(await retrying(async () => {
      during.abort();
      return "done";
    }, { what: "step", log, stop: during.signal })).toBe("done");
  });

  it("a stop during a failing step ends the retries with its error", async () => {
    const stop = new AbortController();
    let attempts = 0;
    const run = retrying(async () => {
      if (++attempts === 2) stop.abort();
      throw new Error(`down ${attempts}`);
    }, { what: "step", log, stop: stop.signal });
    await expect(run).rejects.toThrow("down 2");
    expect(attempts).toBe(2);
  });

  it("a stop in the wait between two attempts ends it at once, with no attempt after it", async () => {
    vi.useFakeTimers();
    const stop = new AbortController();
    let attempts = 0;
    const run = retrying(async () => {
      attempts++;
      throw new Error(`down ${attempts}`);
    }, { what: "step", log, stop: stop.signal });
    const outcome = run.then(() => "resolved", (err: unknown) => err);
    await vi.advanceTimersByTimeAsync(500); // the first wait (0.5 s): the second attempt fails, its wait is 1 s
    expect(attempts).toBe(2);
    stop.abort();
    await vi.advanceTimersByTimeAsync(0); // no time passes: only a wait cut short can settle it
    const settled = await Promise.race([outcome, Promise.resolve("pending")]);
    expect(isStopRequested(settled)).toBe(true);
    expect(attempts).toBe(2);
  });
});
