// The retries of a step that must eventually succeed (src/loop/retry.ts): the daemon's stop ends them, during a
// step or in the wait between two (up to 15 s), so a stop during a NATS outage does not wait for the outage's end.
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { retrying } from "../src/loop/retry.js";

const log = pino({ level: "silent" });

describe("loop - retrying a step", () => {
  it("retries until the step succeeds", async () => {
    let attempts = 0;
    expect(await retrying(async () => (++attempts < 3 ? Promise.reject(new Error("down")) : "done"), { what: "step", log })).toBe("done");
    expect(attempts).toBe(3);
  });

  it("a stop during a step ends the retries with its error", async () => {
    const stop = new AbortController();
    let attempts = 0;
    const run = retrying(async () => {
      if (++attempts === 2) stop.abort();
      throw new Error(`down ${attempts}`);
    }, { what: "step", log, stop: stop.signal });
    await expect(run).rejects.toThrow("down 2");
    expect(attempts).toBe(2);
  });

  it("a stop in the wait between two attempts ends it at once: no attempt after it", async () => {
    const stop = new AbortController();
    let attempts = 0;
    const run = retrying(async () => {
      // the second failure's wait is 1 s: the stop lands in it
      if (++attempts === 2) setImmediate(() => stop.abort());
      throw new Error(`down ${attempts}`);
    }, { what: "step", log, stop: stop.signal });
    await expect(run).rejects.toThrow();
    expect(attempts).toBe(2);
  });
});
