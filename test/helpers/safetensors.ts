// A small safetensors reader/writer for the tests: the goldens scripts/reference/*.py write (common.save_tensors:
// float32 stays float32, integer tensors become int32), header edits that corrupt checkpoints on purpose, and the
// inputs the tests hand to reference scripts. Test-only: the native module has its own loader for checkpoints.
// Format: 8-byte little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]},
// "__metadata__"?: {...}}, then the data block (offsets relative to its start), little-endian.
// Read dtypes: F32, BF16 and F16 (widened to float32), I32, I64 (narrowed to int32, checked); so callers see two kinds.
import { readFile, writeFile } from "node:fs/promises";

export interface HeaderEntry {
  dtype: string;
  shape: number[];
  data_offsets: [number, number];
}

export interface SafetensorsHeader {
  /** byte length of the JSON header */
  length: number;
  entries: Record<string, HeaderEntry>;
  metadata?: Record<string, string>;
}

export interface Tensor<T extends Float32Array | Int32Array = Float32Array | Int32Array> {
  /** dtype as stored in the file */
  dtype: string;
  shape: number[];
  data: T;
}

export function parseHeader(bytes: Uint8Array, file = "<buffer>"): SafetensorsHeader {
  if (bytes.byteLength < 8) throw new Error(`${file}: ${bytes.byteLength} bytes, too short for a safetensors header`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const length = Number(view.getBigUint64(0, true));
  if (length + 8 > bytes.byteLength) throw new Error(`${file}: header of ${length} bytes overruns the file`);
  const json = JSON.parse(Buffer.from(bytes.subarray(8, 8 + length)).toString("utf8")) as Record<string, unknown>;
  const { __metadata__: metadata, ...entries } = json;
  return { length, entries: entries as Record<string, HeaderEntry>, metadata: metadata as Record<string, string> | undefined };
}

function decode(entry: HeaderEntry, raw: Uint8Array, where: string): Float32Array | Int32Array {
  const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  const numel = entry.shape.reduce((a, b) => a * b, 1);
  switch (entry.dtype) {
    case "F32": {
      // Copied element by element: a tensor's offset in the file need not be aligned for a typed-array view.
      const out = new Float32Array(numel);
      for (let i = 0; i < numel; i++) out[i] = view.getFloat32(4 * i, true);
      return out;
    }
    case "BF16": {
      const out = new Float32Array(numel);
      const bits = new Uint32Array(out.buffer);
      for (let i = 0; i < numel; i++) bits[i] = view.getUint16(2 * i, true) << 16;
      return out;
    }
    case "F16": {
      const out = new Float32Array(numel);
      for (let i = 0; i < numel; i++) out[i] = halfToFloat(view.getUint16(2 * i, true));
      return out;
    }
    case "I32": {
      const out = new Int32Array(numel);
      for (let i = 0; i < numel; i++) out[i] = view.getInt32(4 * i, true);
      return out;
    }
    case "I64": {
      const out = new Int32Array(numel);
      for (let i = 0; i < numel; i++) {
        const v = view.getBigInt64(8 * i, true);
        if (v > 2147483647n || v < -2147483648n) throw new Error(`${where}: int64 value ${v} does not fit int32`);
        out[i] = Number(v);
      }
      return out;
    }
    default:
      throw new Error(`${where}: dtype ${entry.dtype} is not read by this helper (F32, I32, BF16, F16, I64)`);
  }
}

function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 0x1f;
  const fraction = h & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24;
  if (exponent === 31) return fraction ? NaN : sign * Infinity;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

export async function readSafetensors(file: string): Promise<Map<string, Tensor>> {
  const bytes = new Uint8Array(await readFile(file));
  const header = parseHeader(bytes, file);
  const base = 8 + header.length;
  const out = new Map<string, Tensor>();
  for (const [name, entry] of Object.entries(header.entries)) {
    const [begin, end] = entry.data_offsets;
    out.set(name, { dtype: entry.dtype, shape: entry.shape, data: decode(entry, bytes.subarray(base + begin, base + end), `${file}: '${name}'`) });
  }
  return out;
}

export async function readHeader(file: string): Promise<SafetensorsHeader> {
  return parseHeader(new Uint8Array(await readFile(file)), file);
}

/** Writes tensors (float32, or bfloat16 where asked: the float32 values truncated to their top 16 bits), sorted by
 *  name, header padded to 8 bytes as the reference writer does — or, with `misalignData`, to 2 more than that (a
 *  writer that does not pad: every float32 then starts off its 4-byte boundary in the file). */
export async function writeSafetensors(
  file: string,
  tensors: Map<string, { shape: number[]; data: Float32Array; dtype?: "F32" | "BF16" }>,
  { misalignData = false }: { misalignData?: boolean } = {},
): Promise<void> {
  const names = [...tensors.keys()].sort();
  const header: Record<string, unknown> = { __metadata__: { format: "pt" } };
  let offset = 0;
  for (const name of names) {
    const t = tensors.get(name)!;
    const numel = t.shape.reduce((a, b) => a * b, 1);
    if (numel !== t.data.length) throw new Error(`tensor ${name}: shape [${t.shape}] holds ${numel} values, data has ${t.data.length}`);
    const bytes = (t.dtype === "BF16" ? 2 : 4) * numel;
    header[name] = { dtype: t.dtype ?? "F32", shape: t.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - (json.length % 8)) % 8 + (misalignData ? 2 : 0));
  const out = Buffer.alloc(8 + json.length + offset);
  out.writeBigUInt64LE(BigInt(json.length), 0);
  out.write(json, 8, "utf8");
  let at = 8 + json.length;
  for (const name of names) {
    const { data, dtype } = tensors.get(name)!;
    const bits = new Uint32Array(data.buffer, data.byteOffset, data.length);
    for (let i = 0; i < data.length; i++) {
      if (dtype === "BF16") at = out.writeUInt16LE(bits[i]! >>> 16, at);
      else at = out.writeFloatLE(data[i]!, at);
    }
  }
  await writeFile(file, out);
}

export function floatTensor(tensors: Map<string, Tensor>, name: string): Tensor<Float32Array> {
  const t = tensors.get(name);
  if (!t) throw new Error(`tensor '${name}' missing (have ${[...tensors.keys()].slice(0, 6).join(", ")}, …)`);
  if (!(t.data instanceof Float32Array)) throw new Error(`tensor '${name}' is ${t.dtype}, expected a float tensor`);
  return t as Tensor<Float32Array>;
}

export function intTensor(tensors: Map<string, Tensor>, name: string): Tensor<Int32Array> {
  const t = tensors.get(name);
  if (!t) throw new Error(`tensor '${name}' missing (have ${[...tensors.keys()].slice(0, 6).join(", ")}, …)`);
  if (!(t.data instanceof Int32Array)) throw new Error(`tensor '${name}' is ${t.dtype}, expected an int tensor`);
  return t as Tensor<Int32Array>;
}
