// The daemon end to end on the GPU machine: its own nats-server, the resident trainer on the real model, and
// simulated rollout workers publishing each round's rollouts (served by the newest adapter, as in `rlloop demo`).
// Per round it reports the time from the last rollout's publish (acked by JetStream) to the round's adapter
// announcement (rlloop.<policy>.adapter.published): intake of the last rollouts, assembly, the PPO round on the
// loaded model, commit, the adapter's upload to the object store and the announcement.
// Usage: node bench/gpu/daemon_e2e.mjs --model DIR --adapter DIR --nats-server BIN [--rounds 2] [--rows 256]
//          [--device cuda] [--code-length 6] [--frame 640x480] [--prompt FILE] [--work DIR]
import { rmSync } from "node:fs";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { adapterName, AdapterPublished, decodeWithNonFinite, subjects } from "../../dist/contract/index.js";
import { parseConfig } from "../../dist/loop/config/index.js";
import { connectNats } from "../../dist/loop/connection.js";
import { Daemon } from "../../dist/loop/daemon.js";
import { publishRollouts } from "../../dist/tools/sim/publisher.js";

const { values: o } = parseArgs({
  options: {
    model: { type: "string" }, adapter: { type: "string" }, "nats-server": { type: "string" },
    rounds: { type: "string", default: "2" }, rows: { type: "string", default: "256" }, device: { type: "string", default: "cuda" },
    "code-length": { type: "string", default: "6" }, frame: { type: "string", default: "640x480" },
    prompt: { type: "string" }, work: { type: "string", default: "/tmp/rlloop-e2e" },
  },
});
const POLICY = "bt";
const rows = Number(o.rows), rounds = Number(o.rounds), codeLength = Number(o["code-length"]);
const [width, height] = o.frame.split("x").map(Number);
const work = resolve(o.work);
rmSync(work, { recursive: true, force: true });
const config = parseConfig({
  workDir: work,
  policy: { name: POLICY, codeLength, maxSteps: 4 },
  round: { rows, minRows: 1, maxWaitS: 600 },
  adapter: { initial: resolve(o.adapter), reference: resolve(o.adapter) },
  trainer: { model: resolve(o.model), device: o.device, batch: 16, accumulation: 2, epochs: 2, seed: 0, prompt: o.prompt ? resolve(o.prompt) : null },
  nats: { serverBin: o["nats-server"] ? resolve(o["nats-server"]) : null },
  observe: { statsIntervalS: 5, metricsPort: null },
});
const began = performance.now();
const daemon = new Daemon({ config });
await daemon.start();
const report = (line) => console.log(JSON.stringify(line));
report({ event: "daemon started (model loaded, probe trained)", seconds: +((performance.now() - began) / 1000).toFixed(2) });
const nats = await connectNats(config.nats, daemon.natsUrl ?? "");
const iterator = nats.nc.subscribe(subjects(POLICY).adapterPublished)[Symbol.asyncIterator]();
let next = 0;
try {
  for (let round = 1; round <= rounds; round++) {
    const started = performance.now();
    let published = 0;
    while (published < rows) {
      const summary = await publishRollouts(nats.js, {
        policy: POLICY, seed: 0, groupSize: 4, maxSteps: 4, codeLength, levels: 10, frame: { width, height },
        adapter: { round: round - 1, name: adapterName(POLICY, round - 1) }, skill: { base: 0.3, perRound: 0.1 },
        memoryBits: 4, runTag: "e2e", startMs: Date.now(), spacingMs: 0, count: 1, start: next++, rate: null, frameRoot: null,
      });
      published += summary.rows;
    }
    const lastPublished = performance.now();
    for (;;) {
      const message = await iterator.next();
      if (message.done) throw new Error("the subscription closed");
      const event = AdapterPublished.parse(decodeWithNonFinite(message.value.string()));
      if (event.round !== round) continue;
      const announced = performance.now();
      report({
        round, rows: event.stats.rows, publishS: +((lastPublished - started) / 1000).toFixed(2),
        lastRolloutToAnnouncedS: +((announced - lastPublished) / 1000).toFixed(2), trainS: event.stats.train_s ?? null,
        pgLoss: event.stats.pg_loss, logpGap: event.stats.logp_gap,
      });
      break;
    }
  }
} finally {
  await nats.nc.drain().catch(() => {});
  await daemon.stop();
}
