// What a trainer's adapter folder must be before the daemon gates, commits or publishes it. A file that merely exists
// is not enough: a truncated or garbled adapter_model.safetensors that is committed becomes the parent of every later
// round and the probe's adapter, so every job, the probe's too, fails on it — the daemon would call its trainer
// broken and wait for ever, the stream stopped behind a file. And an adapter whose weights are NaN (an optimizer step
// after the last statistics were taken) trains with finite statistics and serves garbage to the robots.
//
// The safetensors header is read by hand: the format is an 8-byte little-endian length, a JSON header of
// {name: {dtype, shape, data_offsets}}, then the data (huggingface/safetensors, "Format"); no well-kept npm package
// validates it without a model hub client around it.
import { readFile } from "node:fs/promises";
import { join } from "node:path";

export const ADAPTER_CONFIG = "adapter_config.json";
export const ADAPTER_WEIGHTS = "adapter_model.safetensors";

/** Bytes per element of each safetensors dtype. */
const DTYPE_BYTES: Readonly<Record<string, number>> = {
  BOOL: 1, U8: 1, I8: 1, F8_E5M2: 1, F8_E4M3: 1, I16: 2, U16: 2, F16: 2, BF16: 2, I32: 4, U32: 4, F32: 4, I64: 8, U64: 8, F64: 8,
};
/** The format's own limit on the header (safetensors refuses larger ones). */
const MAX_HEADER_BYTES = 100 * 1024 * 1024;

/** The folder's adapter is unusable; the message says which file and why. */
export class AdapterFileError extends Error {
  override name = "AdapterFileError";
}

interface TensorEntry {
  name: string;
  dtype: string;
  begin: number;
  end: number;
}

/**
 * Checks `dir`'s adapter_config.json (a JSON object) and adapter_model.safetensors (a whole, consistent file holding
 * at least one tensor). Throws AdapterFileError when either is unusable; resolves with the first tensor holding a
 * NaN or an infinity, said as the gate says a statistic ("adapter tensor X is not finite"), or null.
 */
export async function checkAdapterFiles(dir: string): Promise<string | null> {
  await checkConfig(join(dir, ADAPTER_CONFIG));
  const file = join(dir, ADAPTER_WEIGHTS);
  const bytes = await readFile(file).catch((cause: unknown) => {
    throw new AdapterFileError(`${file}: ${(cause as Error).message}`, { cause });
  });
  const { tensors, dataStart } = parseSafetensors(bytes, file);
  const bad = tensors.find((t) => !allFinite(bytes, dataStart + t.begin, dataStart + t.end, t.dtype));
  return bad === undefined ? null : `adapter tensor ${bad.name} is not finite`;
}

async function checkConfig(file: string): Promise<void> {
  let value: unknown;
  try {
    value = JSON.parse(await readFile(file, "utf8"));
  } catch (cause) {
    throw new AdapterFileError(`${file}: ${(cause as Error).message}`, { cause });
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new AdapterFileError(`${file} is not a JSON object`);
}

function parseSafetensors(bytes: Buffer, file: string): { tensors: TensorEntry[]; dataStart: number } {
  const fail = (why: string): never => {
    throw new AdapterFileError(`${file} is not a whole safetensors file: ${why}`);
  };
  if (bytes.length < 8) fail(`${bytes.length} bytes`);
  const headerBytes = Number(bytes.readBigUInt64LE(0));
  if (headerBytes < 2 || headerBytes > MAX_HEADER_BYTES || 8 + headerBytes > bytes.length) fail(`a header of ${headerBytes} bytes in a file of ${bytes.length}`);
  let header: unknown;
  try {
    header = JSON.parse(bytes.subarray(8, 8 + headerBytes).toString("utf8"));
  } catch (cause) {
    fail(`its header is not JSON (${(cause as Error).message})`);
  }
  if (typeof header !== "object" || header === null || Array.isArray(header)) return fail("its header is not a JSON object");
  const dataStart = 8 + headerBytes;
  const tensors = Object.entries(header)
    .filter(([name]) => name !== "__metadata__")
    .map(([name, info]) => tensorEntry(name, info, fail));
  if (tensors.length === 0) fail("it holds no tensor");
  // the format's rule: the data is indexed whole, without holes or overlaps — a truncated file breaks it
  tensors.sort((a, b) => a.begin - b.begin);
  let at = 0;
  for (const t of tensors) {
    if (t.begin !== at) fail(`tensor ${t.name} starts at byte ${t.begin}, not ${at}`);
    at = t.end;
  }
  if (dataStart + at !== bytes.length) fail(`its tensors end at byte ${dataStart + at} of ${bytes.length}`);
  return { tensors, dataStart };
}

function tensorEntry(name: string, info: unknown, fail: (why: string) => never): TensorEntry {
  const { dtype, shape, data_offsets: offsets } = (info ?? {}) as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
  const size = typeof dtype === "string" ? DTYPE_BYTES[dtype] : undefined;
  if (size === undefined) fail(`tensor ${name} has dtype ${JSON.stringify(dtype)}`);
  const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
  if (!Array.isArray(shape) || !shape.every(isCount)) return fail(`tensor ${name} has shape ${JSON.stringify(shape)}`);
  if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every(isCount)) return fail(`tensor ${name} has data_offsets ${JSON.stringify(offsets)}`);
  const [begin, end] = offsets as [number, number];
  if (begin > end) fail(`tensor ${name} has data_offsets ${JSON.stringify(offsets)}`);
  const elements = shape.reduce((n: number, d: number) => n * d, 1);
  if (end - begin !== elements * size!) fail(`tensor ${name} of shape [${shape.join(", ")}] ${dtype} spans ${end - begin} bytes`);
  return { name, dtype: dtype as string, begin, end };
}

/** No NaN or infinity among the floats in bytes[begin, end): an all-ones exponent, read from the raw bits. */
function allFinite(bytes: Buffer, begin: number, end: number, dtype: string): boolean {
  switch (dtype) {
    case "F32": return exponentsBelowMax(words(bytes, begin, end, 4), 1, 0, 0x7f800000);
    case "F64": return exponentsBelowMax(words(bytes, begin, end, 4), 2, 1, 0x7ff00000); // each one's high word
    case "BF16": return exponentsBelowMax(words(bytes, begin, end, 2), 1, 0, 0x7f80);
    case "F16": return exponentsBelowMax(words(bytes, begin, end, 2), 1, 0, 0x7c00);
    default: return true;
  }
}

/** bytes[begin, end) as words of `size` bytes (typed arrays read the host's order: little-endian, as the file's, on
 *  every platform the trainer runs on), copied only where they are not aligned. A typed array's loop is several times
 *  Buffer.readUInt32LE's, which matters for the hundreds of MB of a large adapter. */
function words(bytes: Buffer, begin: number, end: number, size: 2 | 4): Uint16Array | Uint32Array {
  const Words = size === 2 ? Uint16Array : Uint32Array;
  const at = bytes.byteOffset + begin;
  const count = Math.floor((end - begin) / size);
  if (at % size === 0) return new Words(bytes.buffer as ArrayBuffer, at, count); // readFile's Buffer: never shared
  const copy = new Uint8Array(count * size);
  copy.set(bytes.subarray(begin, begin + count * size));
  return new Words(copy.buffer, 0, count);
}

function exponentsBelowMax(values: Uint16Array | Uint32Array, stride: number, first: number, mask: number): boolean {
  for (let i = first; i < values.length; i += stride) if ((values[i]! & mask) === mask) return false;
  return true;
}
