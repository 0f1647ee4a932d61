// The daemon's upload of a round's continuation (adapter + optimizer state) into the object store, against the
// NATS client's defaults, on a real nats-server started here. Each run puts a fresh copy of the same random file:
// once with the client's defaults (pure-JS SHA-256, 128 KiB chunks) and once through storeFolder on a store from
// src/loop/object-stores.ts (the daemon's path: node:crypto's SHA-256, chunks of the server's max_payload),
// alternating.
// Usage: npx tsx bench/object-upload.ts [--mb 512] [--repeats 3]
import { randomBytes } from "node:crypto";
import { createReadStream, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { parseArgs } from "node:util";
import { connect } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { pino } from "pino";
import { setSha256Backend } from "@nats-io/obj";
import { openAdapterBucket } from "../src/loop/buckets.js";
import { parseConfig } from "../src/loop/config/index.js";
import { storeFolder } from "../src/loop/continuation.js";
import { startOwnServer } from "../src/loop/nats-server.js";

const { values: args } = parseArgs({ options: { mb: { type: "string", default: "512" }, repeats: { type: "string", default: "3" } } });
const dir = mkdtempSync(join(tmpdir(), "rlloop-upload-"));
const folder = join(dir, "adapter");
const mb = Number(args.mb);
await import("node:fs/promises").then((fs) => fs.mkdir(folder));
writeFileSync(join(folder, "adapter_model.safetensors"), randomBytes(mb * 1024 * 1024));
const server = await startOwnServer(parseConfig({ workDir: join(dir, "server") }), pino({ level: "warn" }));
const nc = await connect({ servers: server.url });
const jsm = await jetstreamManager(nc);
try {
  const store = await openAdapterBucket(nc, { replicas: 1 });
  console.log(JSON.stringify({ server: nc.info?.version, maxPayload: nc.info?.max_payload, mb }));
  const ratios: number[] = [];
  for (let i = 0; i < Number(args.repeats); i++) {
    setSha256Backend("js"); // the client's default
    const t0 = performance.now();
    await store.put({ name: `baseline/${i}` }, Readable.toWeb(createReadStream(join(folder, "adapter_model.safetensors"))) as ReadableStream<Uint8Array>);
    const baselineS = (performance.now() - t0) / 1000;
    setSha256Backend("native"); // as src/loop/object-stores.ts sets it
    const t1 = performance.now();
    await storeFolder(store, jsm, folder, `daemon/${i}`, ["adapter_model.safetensors"]);
    const daemonS = (performance.now() - t1) / 1000;
    ratios.push(baselineS / daemonS);
    console.log(JSON.stringify({ run: i + 1, baselineS: +baselineS.toFixed(2), storeFolderS: +daemonS.toFixed(2), speedup: +(baselineS / daemonS).toFixed(2) }));
    await store.delete(`baseline/${i}`);
    await store.delete(`daemon/${i}/adapter_model.safetensors`);
  }
  ratios.sort((a, b) => a - b);
  console.log(JSON.stringify({ medianSpeedup: +ratios[Math.floor(ratios.length / 2)]!.toFixed(2) }));
} finally {
  await nc.close();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
