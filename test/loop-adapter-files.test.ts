// What the daemon accepts as a trainer's adapter (src/loop/adapter-files.ts): a whole safetensors file, against
// files written the way the reference writer writes them (test/helpers/safetensors.ts) and damaged the ways a
// crash, a full disk or a diverged optimizer step damage them.
import { mkdir, mkdtemp, readFile, rm, stat, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdapterFileError, checkAdapterFiles } from "../src/loop/adapter-files.js";
import { readTrainerOutput } from "../src/loop/trainer.js";
import { TrainerError } from "../src/loop/errors.js";
import { writeSafetensors } from "./helpers/safetensors.js";

const weights = (dir: string) => join(dir, "adapter_model.safetensors");
const STATS = { pg_loss: 0.01, kl: 0.001, clip_frac: 0, logp_gap: 0.1, logp_gap_abs: 0.2, rows: 4, train_s: 1 };

describe("loop - the adapter files a trainer hands the daemon", () => {
  let root: string;
  let n = 0;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "rlloop-adapter-files-"));
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  /** An adapter folder with two LoRA tensors (`b` in the dtype asked), stats.json beside them. */
  async function adapter(opts: { dtype?: "F32" | "BF16"; b?: number[]; misalign?: boolean; stats?: string } = {}): Promise<string> {
    const dir = join(root, `a${++n}`);
    await mkdir(dir);
    await writeFile(join(dir, "adapter_config.json"), JSON.stringify({ peft_type: "LORA", r: 2 }));
    await writeSafetensors(join(dir, "adapter_model.safetensors"), new Map([
      ["layers.0.q_proj.lora_A.weight", { shape: [2, 3], data: Float32Array.from([1, 2, 3, 4, 5, 6]) }],
      ["layers.0.q_proj.lora_B.weight", { shape: [3, 2], data: Float32Array.from(opts.b ?? [0, 0, 0, 0, 0, -0]), dtype: opts.dtype ?? "F32" }],
    ]), { misalignData: opts.misalign ?? false });
    await writeFile(join(dir, "stats.json"), opts.stats ?? JSON.stringify(STATS));
    return dir;
  }

  /** Replaces the safetensors header's JSON (same length, padded) to say what the test needs. */
  async function withHeader(dir: string, edit: (header: Record<string, unknown>) => void): Promise<void> {
    const file = join(dir, "adapter_model.safetensors");
    const bytes = await readFile(file);
    const length = Number(bytes.readBigUInt64LE(0));
    const header = JSON.parse(bytes.subarray(8, 8 + length).toString()) as Record<string, unknown>;
    edit(header);
    const json = JSON.stringify(header).padEnd(length, " ");
    if (json.length !== length) throw new Error("edited header does not fit");
    bytes.write(json, 8, "utf8");
    await writeFile(file, bytes);
  }

  it("accepts whole adapters, float32 and bfloat16, aligned or not, with large finite values and signed zeros", async () => {
    for (const dtype of ["F32", "BF16"] as const) {
      for (const misalign of [false, true]) {
        expect(await checkAdapterFiles(await adapter({ dtype, misalign, b: [3e38, -3e38, 1e-45, -0, 0, 65504] }))).toBeNull();
      }
    }
  });

  it("names the first tensor holding a NaN or an infinity, in either dtype", async () => {
    for (const dtype of ["F32", "BF16"] as const) {
      for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
        expect(await checkAdapterFiles(await adapter({ dtype, misalign: dtype === "BF16", b: [0, 1, 2, bad, 4, 5] }))).toBe("adapter tensor layers.0.q_proj.lora_B.weight is not finite");
      }
    }
  });

  it("finds a NaN past the first chunk it reads (16 MiB), in a tensor that straddles chunks", async () => {
    const dir = await adapter();
    const data = new Float32Array(5_000_000); // 20 MB
    const big = new Map([["big", { shape: [data.length], data }], ["small", { shape: [2], data: Float32Array.of(1, 2) }]]);
    await writeSafetensors(weights(dir), big, { misalignData: true });
    expect(await checkAdapterFiles(dir)).toBeNull();
    data[data.length - 1] = Number.NaN;
    await writeSafetensors(weights(dir), big, { misalignData: true });
    expect(await checkAdapterFiles(dir)).toBe("adapter tensor big is not finite");
  });

  it("reads float64, float16 and the float8 kinds by their own exponents, and every other dtype as it comes", async () => {
    /** One tensor of `dtype` holding `bytes`, beside an int32 tensor of all-ones bits (not a float: never "NaN"). */
    const file = async (dtype: string, bytes: Buffer) => {
      const dir = await adapter();
      const size = dtype === "F64" ? 8 : dtype.startsWith("F8") ? 1 : 2;
      const header = JSON.stringify({ ints: { dtype: "I32", shape: [1], data_offsets: [0, 4] }, x: { dtype, shape: [bytes.length / size], data_offsets: [4, 4 + bytes.length] } });
      const length = Buffer.alloc(8);
      length.writeBigUInt64LE(BigInt(header.length));
      await writeFile(weights(dir), Buffer.concat([length, Buffer.from(header), Buffer.from([0xff, 0xff, 0xff, 0xff]), bytes]));
      return checkAdapterFiles(dir);
    };
    const f64 = (...values: number[]) => Buffer.from(Float64Array.from(values).buffer);
    const f16 = (...bits: number[]) => Buffer.from(Uint16Array.from(bits).buffer);
    expect(await file("F64", f64(1e308, -0, 5e-324))).toBeNull();
    expect(await file("F64", f64(1, Number.NaN))).toBe("adapter tensor x is not finite");
    expect(await file("F64", f64(Number.NEGATIVE_INFINITY, 1))).toBe("adapter tensor x is not finite");
    expect(await file("F16", f16(0x7bff, 0xfbff, 0x0001))).toBeNull(); // ±65504 and the smallest subnormal
    expect(await file("F16", f16(0x3c00, 0x7e00))).toBe("adapter tensor x is not finite"); // NaN
    expect(await file("F16", f16(0xfc00))).toBe("adapter tensor x is not finite"); // -inf
    expect(await file("F8_E4M3", Buffer.from([0x7e, 0xfe, 0x00, 0x80]))).toBeNull(); // ±448, ±0
    expect(await file("F8_E4M3", Buffer.from([0x01, 0xff]))).toBe("adapter tensor x is not finite");
    expect(await file("F8_E5M2", Buffer.from([0x7b, 0xfb]))).toBeNull(); // ±57344
    expect(await file("F8_E5M2", Buffer.from([0x7c]))).toBe("adapter tensor x is not finite"); // +inf
  });

  it.each([
    ["truncated by one byte", async (dir: string) => truncate(weights(dir), (await stat(weights(dir))).size - 1), /not a whole safetensors file/],
    ["truncated inside its header", async (dir: string) => truncate(join(dir, "adapter_model.safetensors"), 20), /a header of \d+ bytes in a file of 20/],
    ["empty", async (dir: string) => writeFile(join(dir, "adapter_model.safetensors"), ""), /0 bytes/],
    ["with bytes after its tensors", async (dir: string) => writeFile(join(dir, "adapter_model.safetensors"), Buffer.concat([await readFile(join(dir, "adapter_model.safetensors")), Buffer.alloc(4)])), /tensors end at byte/],
    ["with a hole between tensors", async (dir: string) => withHeader(dir, (h) => { (h["layers.0.q_proj.lora_A.weight"] as { data_offsets: number[] }).data_offsets = [0, 20]; (h["layers.0.q_proj.lora_A.weight"] as { shape: number[] }).shape = [5]; }), /starts at byte 24, not 20/],
    ["with a shape its bytes do not hold", async (dir: string) => withHeader(dir, (h) => { (h["layers.0.q_proj.lora_B.weight"] as { shape: number[] }).shape = [3, 3]; }), /shape \[3, 3\] F32 spans 24 bytes/],
    ["with an unknown dtype", async (dir: string) => withHeader(dir, (h) => { (h["layers.0.q_proj.lora_B.weight"] as { dtype: string }).dtype = "F12"; }), /dtype "F12"/],
    ["without tensors", async (dir: string) => writeFile(join(dir, "adapter_model.safetensors"), Buffer.concat([Buffer.from([2, 0, 0, 0, 0, 0, 0, 0]), Buffer.from("{}")])), /holds no tensor/],
    ["with a header that is not JSON", async (dir: string) => { const b = await readFile(weights(dir)); b.write("[", 8); await writeFile(weights(dir), b); }, /header is not JSON/],
    ["missing", async (dir: string) => rm(join(dir, "adapter_model.safetensors")), /ENOENT/],
    ["beside an adapter_config.json that is not JSON", async (dir: string) => writeFile(join(dir, "adapter_config.json"), "{\"r\": 2"), /adapter_config\.json/],
    ["beside an adapter_config.json that is a list", async (dir: string) => writeFile(join(dir, "adapter_config.json"), "[]"), /is not a JSON object/],
  ])("refuses an adapter %s", async (_what, damage, message) => {
    const dir = await adapter();
    await damage(dir);
    const err = await checkAdapterFiles(dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AdapterFileError);
    expect((err as Error).message).toMatch(message);
    // the daemon reads a trainer's output through it: a failed job, which the probe then judges
    const failed = await readTrainerOutput(dir).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(TrainerError);
  });

  it("a trainer's output with NaN weights fails the job unless its statistics already say it (they are judged as such)", async () => {
    const nanWeights = await adapter({ b: [0, Number.NaN, 0, 0, 0, 0] });
    await expect(readTrainerOutput(nanWeights)).rejects.toThrow(/adapter tensor layers\.0\.q_proj\.lora_B\.weight is not finite/);
    const nanBoth = await adapter({ b: [0, Number.NaN, 0, 0, 0, 0], stats: JSON.stringify({ ...STATS, pg_loss: "NaN" }).replace('"NaN"', "NaN") });
    expect((await readTrainerOutput(nanBoth)).pg_loss).toBeNaN();
    expect(await readTrainerOutput(await adapter())).toEqual(STATS);
  });
});
