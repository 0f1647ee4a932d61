// The round events' outbox (src/loop/event-outbox.ts) against a scripted publish function: its ordering, the bound
// on what a round waits, events the server can never take, the limit, the stop, and an event sent at every
// microtask around the end of a drain. The whole path through a real nats-server outage: loop-faults.test.ts.
import { JetStreamApiError } from "@nats-io/jetstream";
import { errors as natsErrors } from "@nats-io/nats-core";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { EventOutbox, OUTBOX_LIMIT, type OutboxEvent } from "../src/loop/event-outbox.js";

const quiet = pino({ level: "silent" });
const event = (label: string): OutboxEvent => ({ subject: `rlloop.bt.round.${label}`, data: label, msgID: label, label });

/** A publish function that fails while `down`, refuses the labels in `refused`, and records what it published. */
function fakeServer() {
  const published: string[] = [];
  const state = { down: false, tries: 0, refused: new Map<string, Error>() };
  const publish = async (e: OutboxEvent) => {
    state.tries++;
    await Promise.resolve();
    const refusal = state.refused.get(e.label);
    if (refusal) throw refusal;
    if (state.down) throw new natsErrors.TimeoutError();
    published.push(e.label);
  };
  return { published, state, publish };
}

/** Polls `done` every 10 ms, 10 s at most (the drain runs on microtasks and cut waits: it needs no timer). */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !done(); i++) await new Promise((r) => setTimeout(r, 10));
}

describe("loop - the round events' outbox", () => {
  it("publishes in order; a round waits two tries at most while NATS is down, later events not at all; all are published once it is back", async () => {
    const server = fakeServer();
    const outbox = new EventOutbox(server.publish, quiet);
    await outbox.send(event("closed"));
    server.state.down = true;
    await outbox.send(event("training")); // returns after its two tries
    expect(server.state.tries).toBe(3);
    await outbox.send(event("trained")); // behind one that waits: at once
    expect([server.state.tries, outbox.waiting]).toEqual([3, 2]);
    server.state.down = false;
    outbox.retryNow();
    await until(() => outbox.waiting === 0);
    expect(server.published).toEqual(["closed", "training", "trained"]);
    expect(outbox.waiting).toBe(0);
  });

  it("an event sent at any microtask around the end of a drain is published (none waits for ever)", async () => {
    for (let ticks = 0; ticks < 12; ticks++) {
      const published: string[] = [];
      let second: Promise<void> | null = null;
      const outbox: EventOutbox = new EventOutbox(async (e) => {
        const done = Promise.resolve().then(() => void published.push(e.label));
        // the second event is sent `ticks` microtasks after the first publish settles, from outside the drain
        if (e.label === "first") {
          void done.then(async () => {
            for (let i = 0; i < ticks; i++) await Promise.resolve();
            second = outbox.send(event("second"));
          });
        }
        return done;
      }, quiet);
      await outbox.send(event("first"));
      await until(() => second !== null);
      const answered = await Promise.race([second!.then(() => true), new Promise((r) => setTimeout(() => r(false), 1000))]);
      expect([ticks, answered, published]).toEqual([ticks, true, ["first", "second"]]);
    }
  });

  it("a connection back while a try is in flight makes the next try immediate, not after the backoff", async () => {
    const tries: string[] = [];
    let answer: (() => void) | null = null;
    let fail = true;
    const outbox = new EventOutbox(async (e) => {
      tries.push(e.label);
      if (!fail) return;
      await new Promise<void>((r) => (answer = r)); // a try that takes its time, then fails
      throw new natsErrors.TimeoutError();
    }, quiet);
    const sent = outbox.send(event("a"));
    await until(() => answer !== null);
    answer!(); // first try fails
    await until(() => tries.length === 2);
    answer!(); // second fails: the sender goes on, the backoff begins
    await sent;
    // wait out two backoffs (1 s, 2 s): the fourth try is in flight, and the next wait would be 4 s
    await until(() => tries.length === 3);
    answer!();
    await until(() => tries.length === 4);
    fail = false;
    outbox.retryNow(); // the connection came back during the fourth try
    answer!();
    // tried again at once: on microtasks, before the event loop's next turn (a backoff is a timer, 4 s away)
    await new Promise((r) => setImmediate(r));
    expect(tries.length).toBe(5);
    await until(() => outbox.waiting === 0);
    expect(outbox.waiting).toBe(0);
  });

  it("an event the server can never take (max_payload, the stream's message size) is dropped; the ones behind it are published", async () => {
    const server = fakeServer();
    server.state.refused.set("huge", new JetStreamApiError({ err_code: 10054, code: 400, description: "message size exceeds maximum allowed" }));
    server.state.refused.set("oversized", new natsErrors.InvalidArgumentError("'payload' max_payload size exceeded"));
    const outbox = new EventOutbox(server.publish, quiet);
    await Promise.all(["a", "huge", "b", "oversized", "c"].map((l) => outbox.send(event(l))));
    await until(() => outbox.waiting === 0);
    expect(server.published).toEqual(["a", "b", "c"]);
    expect(outbox.waiting).toBe(0);
  });

  it(`keeps ${OUTBOX_LIMIT} events at most: a new one past it is dropped, the ones kept are published in order`, async () => {
    const server = fakeServer();
    server.state.down = true;
    const outbox = new EventOutbox(server.publish, quiet);
    for (let i = 0; i <= OUTBOX_LIMIT; i++) await outbox.send(event(`e${i}`));
    expect(outbox.waiting).toBe(OUTBOX_LIMIT);
    server.state.down = false;
    outbox.retryNow();
    await until(() => outbox.waiting === 0);
    expect(server.published.length).toBe(OUTBOX_LIMIT);
    expect(server.published[0]).toBe("e0");
    expect(server.published.at(-1)).toBe(`e${OUTBOX_LIMIT - 1}`);
  });

  it("close() during an outage releases every sender and refuses what is sent after it; a try that never answers does not hold it", async () => {
    const server = fakeServer();
    server.state.down = true;
    const outbox = new EventOutbox(server.publish, quiet);
    await outbox.send(event("a"));
    const behind = outbox.send(event("b"));
    await outbox.close(1000);
    await behind;
    await outbox.send(event("late")); // answered at once
    expect([outbox.waiting, server.published]).toEqual([0, []]);

    const hanging = new EventOutbox(() => new Promise(() => {}), quiet);
    const stuck = hanging.send(event("stuck"));
    await hanging.close(100);
    await stuck;
    expect(hanging.waiting).toBe(0);
  });

  it("close() publishes what waits when NATS answers again", async () => {
    const server = fakeServer();
    server.state.down = true;
    const outbox = new EventOutbox(server.publish, quiet);
    await outbox.send(event("a"));
    await outbox.send(event("b"));
    server.state.down = false;
    await outbox.close(1000);
    expect(server.published).toEqual(["a", "b"]);
  });
});
