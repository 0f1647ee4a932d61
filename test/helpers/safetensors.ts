// Reads the goldens that scripts/reference/*.py write with safetensors (common.save_tensors: float32 stays float32,
// integer tensors become int32). Test-only: the native module has its own loader for checkpoints.
// Half-precision tensors are widened to float32 and int64 narrowed to int32 (checked), so callers see two kinds.
import { readFile } from "node:fs/promises";

export interface Tensor {
  /** dtype as stored in the file */
  dtype: string;
  shape: number[];
  data: Float32Array | Int32Array;
}

interface Entry {
  dtype: string;
  shape: number[];
  data_offsets: [number, number];
}

export async function readSafetensors(path: string): Promise<Map<string, Tensor>> {
  const bytes = await readFile(path);
  if (bytes.byteLength < 8) throw new Error(`${path}: ${bytes.byteLength} bytes, too short for a safetensors header`);
  const headerLength = Number(bytes.readBigUInt64LE(0));
  if (8 + headerLength > bytes.byteLength) throw new Error(`${path}: header of ${headerLength} bytes overruns the file`);
  const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString("utf8")) as Record<string, Entry>;
  const base = 8 + headerLength;
  const tensors = new Map<string, Tensor>();
  for (const [name, entry] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const [start, end] = entry.data_offsets;
    // Copied out: a tensor's offset in the file need not be aligned for a typed-array view.
    const raw = new Uint8Array(bytes.subarray(base + start, base + end));
    tensors.set(name, { dtype: entry.dtype, shape: entry.shape, data: decode(raw, entry.dtype, `${path}: '${name}'`) });
  }
  return tensors;
}

function decode(raw: Uint8Array, dtype: string, where: string): Float32Array | Int32Array {
  const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  switch (dtype) {
    case "F32":
      return new Float32Array(raw.buffer, raw.byteOffset, raw.byteLength / 4);
    case "I32":
      return new Int32Array(raw.buffer, raw.byteOffset, raw.byteLength / 4);
    case "BF16": {
      const out = new Float32Array(raw.byteLength / 2);
      const bits = new Uint32Array(out.buffer);
      for (let i = 0; i < out.length; i++) bits[i] = view.getUint16(2 * i, true) << 16;
      return out;
    }
    case "F16": {
      const out = new Float32Array(raw.byteLength / 2);
      for (let i = 0; i < out.length; i++) out[i] = halfToFloat(view.getUint16(2 * i, true));
      return out;
    }
    case "I64": {
      const out = new Int32Array(raw.byteLength / 8);
      for (let i = 0; i < out.length; i++) {
        const v = view.getBigInt64(8 * i, true);
        if (v > 2147483647n || v < -2147483648n) throw new Error(`${where}: int64 value ${v} does not fit int32`);
        out[i] = Number(v);
      }
      return out;
    }
    default:
      throw new Error(`${where}: dtype ${dtype} is not read by this helper (F32, I32, BF16, F16, I64)`);
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
