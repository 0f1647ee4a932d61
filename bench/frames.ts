// What one frame costs at intake, by stage, without NATS: read it from the frame root (frameBytes), then
// src/loop/frames.ts's two paths — written as it came (header, full decode, write) and re-encoded (header,
// decode + PNG encode, write) — each on the same frames, `--parallel` at a time (the daemon judges 4 messages of
// up to 4 steps at once, on libuv's pool of 4 threads). CPU is the process's user + system time, all threads.
//   npx tsx bench/frames.ts [--frames 2000] [--kind sim] [--parallel 16] [--repeat 3] [--sharp-cache on|off] [--sharp-concurrency N]
// --kind as in bench/intake.ts (sim = the simulator's 640x480 RGBA PNGs). The sharp knobs change the process-wide
// settings before the first frame, to compare them in separate runs.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { rename, writeFile } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import sharp from "sharp";
import { FrameRoots } from "../src/loop/frame-roots.js";
import { frameBytes, framePng, reencode, writeFramePng, type FrameLimits } from "../src/loop/frames.js";
import { renderFrame } from "../src/tools/sim/frame.js";
import { encodeAs, FRAME_KINDS, frameKind } from "./frame-kinds.js";
import { sceneAt, scenario } from "../src/tools/sim/scenario.js";

const { values: args } = parseArgs({
  options: {
    frames: { type: "string", default: "2000" },
    kind: { type: "string", default: "sim" },
    parallel: { type: "string", default: "16" },
    repeat: { type: "string", default: "3" },
    "sharp-cache": { type: "string", default: "on" },
    "sharp-concurrency": { type: "string" },
  },
});
const FRAMES = Number(args.frames);
const PARALLEL = Number(args.parallel);
if (args["sharp-cache"] === "off") sharp.cache(false);
if (args["sharp-concurrency"] !== undefined) sharp.concurrency(Number(args["sharp-concurrency"]));

const KIND = frameKind(args.kind);

interface Timing { wallUs: number; userUs: number; systemUs: number }

/** `work(i)` for i in 0..FRAMES, PARALLEL at a time; per-frame wall and CPU time. */
async function timed(work: (i: number) => Promise<unknown>): Promise<Timing> {
  const started = performance.now();
  const cpu0 = process.cpuUsage();
  let next = 0;
  await Promise.all(Array.from({ length: PARALLEL }, async () => {
    while (next < FRAMES) await work(next++);
  }));
  const cpu = process.cpuUsage(cpu0);
  return { wallUs: ((performance.now() - started) * 1000) / FRAMES, userUs: cpu.user / FRAMES, systemUs: cpu.system / FRAMES };
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "rlloop-bench-frames-"));
  const root = join(dir, "frames");
  const out = join(dir, "out");
  mkdirSync(root);
  mkdirSync(out);
  try {
    const paths: string[] = [];
    for (let i = 0; i < 16; i++) {
      const path = join(root, `frame-${i}.${FRAME_KINDS[KIND]}`);
      writeFileSync(path, await encodeAs(KIND, await renderFrame(sceneAt(scenario(7, i), i % 3), { width: 640, height: 480 })));
      paths.push(path);
    }
    const limits: FrameLimits = { roots: new FrameRoots([root]), maxBytes: 16 << 20, maxPixels: 40_000_000, objects: null };
    const bytes = await Promise.all(paths.map((p) => frameBytes({ path: p }, limits)));
    const frame = (i: number) => bytes[i % bytes.length] as Buffer;
    const stages: [string, (i: number) => Promise<unknown>][] = [
      ["frameBytes (realpath, stat, read)", (i) => frameBytes({ path: paths[i % paths.length] as string }, limits)],
      ["sharp metadata (header)", (i) => sharp(frame(i)).metadata()],
      ["full decode to raw", (i) => sharp(frame(i), { failOn: "warning" }).raw().toBuffer()],
      // what framePng runs after the header for a frame it writes as it came (frames.ts, decodeToLastPixel)
      ["decode to the last pixel", (i) => sharp(frame(i), { failOn: "warning" }).extract({ left: 639, top: 479, width: 1, height: 1 }).raw().toBuffer()],
      ["framePng (the daemon's choice)", (i) => framePng(frame(i), limits)],
      ["reencode (always)", (i) => reencode(frame(i), limits)],
      ["write + rename, a new file", (i) => writeFile(join(out, `w${i}.tmp`), frame(i)).then(() => rename(join(out, `w${i}.tmp`), join(out, `w${i}.png`)))],
      ["writeFramePng (choice + write)", (i) => writeFramePng(frame(i), join(out, `${i}.png`), limits)],
    ];
    console.log(`machine: ${cpus().length} x ${cpus()[0]?.model}; node ${process.version}; sharp ${sharp.versions.sharp} (libvips ${sharp.versions.vips}); sharp concurrency ${sharp.concurrency()}, cache ${args["sharp-cache"]}; UV_THREADPOOL_SIZE ${process.env.UV_THREADPOOL_SIZE ?? "4 (default)"}`);
    console.log(`${FRAMES} frames a stage, ${PARALLEL} at a time, 16 distinct 640x480 ${KIND} frames, ${Math.round(bytes.reduce((a, b) => a + b.length, 0) / bytes.length)} bytes on average`);
    for (let r = 0; r < Number(args.repeat); r++) {
      // every round writes new files, as intake does (a frame file name is never reused before its round moves it)
      rmSync(out, { recursive: true, force: true });
      mkdirSync(out);
      for (const [name, work] of stages) {
        const t = await timed(work);
        const us = (v: number) => v.toFixed(0).padStart(6);
        console.log(`  ${name.padEnd(34)} ${us(t.wallUs)} us wall  ${us(t.userUs + t.systemUs)} us CPU (user ${us(t.userUs)}, system ${us(t.systemUs)})  per frame`);
      }
      console.log("");
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
