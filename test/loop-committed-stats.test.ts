// A round committed as published whose announcement a kill cut short is published by the next start with its
// statistics (daemon.ts, committed-stats.ts): from the adapter's stats.json, else the manifest. A read the disk fails
// is the host's fault, retried (RoundRunner.republish), never the daemon's end; statistics that are simply not there
// are an error. EIO cannot be made on this machine's disks, so the two readers are replaced by ones that fail as a
// failing disk does (the errno error of node:fs, or the trainer's TrainerError around it).
import pino from "pino";
import { beforeEach, describe, expect, it, vi } from "vitest";
import type { PpoStats } from "../src/contract/index.js";
import { committedStats } from "../src/loop/committed-stats.js";
import { isDiskFault, TrainerError } from "../src/loop/errors.js";
import { retrying } from "../src/loop/retry.js";
import type { StateRecord } from "../src/loop/state.js";

const reads = vi.hoisted(() => ({ adapter: [] as (PpoStats | Error)[], manifest: [] as ({ stats: PpoStats | null } | null | Error)[] }));
const next = <T>(queue: (T | Error)[]): T => {
  const value = queue.length > 1 ? queue.shift()! : queue[0]!;
  if (value instanceof Error) throw value;
  return value;
};
vi.mock("../src/loop/trainer.js", () => ({ readTrainerOutput: async () => next(reads.adapter) }));
vi.mock("../src/loop/manifest.js", () => ({ readManifest: async () => next(reads.manifest) }));

const stats = { pg_loss: -0.2, kl: 0.01, clip_frac: 0, logp_gap: 0.3, logp_gap_abs: 0.3, rows: 8, train_s: 1 } as PpoStats;
const record = { policy: "p", round: 3, adapter: { round: 3, path: "/work/adapters/3", sha256: null } } as unknown as StateRecord;
const eio = () => Object.assign(new Error("EIO: i/o error, read"), { code: "EIO" });
const noStats = (cause: unknown) => new TrainerError("trainer output /work/adapters/3 lacks stats.json", { cause });

describe("loop - a committed round's statistics, read again at the next start", () => {
  beforeEach(() => {
    reads.adapter = [];
    reads.manifest = [];
  });

  it("from the adapter's stats.json, else from the manifest", async () => {
    reads.adapter = [stats];
    expect(await committedStats(record, "/work")).toBe(stats);
    reads.adapter = [noStats(Object.assign(new Error("ENOENT"), { code: "ENOENT" }))];
    reads.manifest = [{ stats }];
    expect(await committedStats(record, "/work")).toBe(stats);
  });

  it("a read the disk fails throws the disk's error (retried); statistics that are not there are an error of their own", async () => {
    reads.adapter = [noStats(eio())];
    reads.manifest = [{ stats: null }];
    const adapterFailed = await committedStats(record, "/work").catch((err: unknown) => err);
    expect(isDiskFault(adapterFailed)).toBe(true);
    reads.adapter = [noStats(Object.assign(new Error("ENOENT"), { code: "ENOENT" }))];
    reads.manifest = [eio()];
    expect(isDiskFault(await committedStats(record, "/work").catch((err: unknown) => err))).toBe(true);
    // the errno error raw (a weights file's read), or two causes down (a TrainerError around an AdapterFileError)
    reads.adapter = [eio()];
    reads.manifest = [{ stats: null }];
    expect(isDiskFault(await committedStats(record, "/work").catch((err: unknown) => err))).toBe(true);
    reads.adapter = [noStats(new Error("adapter_model.safetensors cannot be read", { cause: eio() }))];
    expect(isDiskFault(await committedStats(record, "/work").catch((err: unknown) => err))).toBe(true);
    reads.adapter = [noStats(Object.assign(new Error("ENOENT"), { code: "ENOENT" }))];
    reads.manifest = [null];
    const missing = await committedStats(record, "/work").catch((err: unknown) => err);
    expect(isDiskFault(missing)).toBe(false);
    expect((missing as Error).message).toMatch(/round 3: its adapter is served, but neither the adapter nor its round.s manifest has its statistics/);
  });

  it("retried the way RoundRunner.republish does: the disk failing twice, then the statistics", async () => {
    reads.adapter = [noStats(eio()), noStats(eio()), stats];
    reads.manifest = [{ stats: null }];
    const log = pino({ level: "silent" });
    const read = retrying(() => committedStats(record, "/work"), { what: "statistics of round 3", log, fatal: (err) => !isDiskFault(err) });
    expect(await read).toBe(stats);
  });
});
