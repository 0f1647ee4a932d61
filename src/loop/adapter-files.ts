// What a trainer's adapter folder must be before the daemon gates, commits or publishes it. A file that merely exists
// is not enough: a truncated or garbled adapter_model.safetensors that is committed becomes the parent of every later
// round and the probe's adapter, so every job, the probe's too, fails on it — the daemon would call its trainer
// broken and wait for ever, the stream stopped behind a file. And an adapter whose weights are NaN (an optimizer step
// after the last statistics were taken) trains with finite statistics and serves garbage to the robots.
//
// The safetensors header is read by hand: the format is an 8-byte little-endian length, a JSON header of
// {name: {dtype, shape, data_offsets}}, then the data (huggingface/safetensors, "Format"); no well-kept npm package
// validates it without a model hub client around it.
import { open, readFile, type FileHandle } from "node:fs/promises";
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

/** Bytes read at a time when looking for non-finite values: the file is never held whole (an adapter may pass
 *  Node's 2 GiB readFile limit), and the event loop gets a turn between reads. A multiple of every dtype's size. */
const CHUNK_BYTES = 16 * 1024 * 1024;

/**
 * Checks `dir`'s adapter_config.json (a JSON object) and adapter_model.safetensors (a whole, consistent file holding
 * at least one tensor). Throws AdapterFileError when either is unusable; resolves with the first tensor holding a
 * NaN or an infinity, said as the gate says a statistic ("adapter tensor X is not finite"), or null.
 */
export async function checkAdapterFiles(dir: string): Promise<string | null> {
  await checkConfig(join(dir, ADAPTER_CONFIG));
  const file = join(dir, ADAPTER_WEIGHTS);
  const handle = await open(file, "r").catch((cause: unknown) => {
    throw new AdapterFileError(`${file}: ${(cause as Error).message}`, { cause });
  });
  try {
    const { size } = await handle.stat();
    const { tensors, dataStart } = await readLayout(handle, size, file);
    const chunk = Buffer.allocUnsafeSlow(CHUNK_BYTES); // its own ArrayBuffer: every typed view of it is aligned
    for (const t of tensors) {
      if (!(await allFinite(handle, chunk, dataStart + t.begin, dataStart + t.end, t.dtype))) return `adapter tensor ${t.name} is not finite`;
    }
    return null;
  } finally {
    await handle.close();
  }
}

/** How many values adapter_model.safetensors in `dir` holds (its header read, checked against the file's size). */
export async function adapterElements(dir: string): Promise<number> {
  const file = join(dir, ADAPTER_WEIGHTS);
  const handle = await open(file, "r");
  try {
    const { tensors } = await readLayout(handle, (await handle.stat()).size, file);
    return tensors.reduce((n, t) => n + (t.end - t.begin) / (DTYPE_BYTES[t.dtype] as number), 0);
  } finally {
    await handle.close();
  }
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

/** The header's tensors, checked against the file's size. */
async function readLayout(handle: FileHandle, size: number, file: string): Promise<{ tensors: TensorEntry[]; dataStart: number }> {
  const fail = (why: string): never => {
    throw new AdapterFileError(`${file} is not a whole safetensors file: ${why}`);
  };
  if (size < 8) fail(`${size} bytes`);
  const prefix = Buffer.alloc(8);
  await readFully(handle, prefix, 8, 0);
  const headerBytes = Number(prefix.readBigUInt64LE(0));
  if (headerBytes < 2 || headerBytes > MAX_HEADER_BYTES || 8 + headerBytes > size) fail(`a header of ${headerBytes} bytes in a file of ${size}`);
  const headerText = Buffer.alloc(headerBytes);
  await readFully(handle, headerText, headerBytes, 8);
  let header: unknown;
  try {
    header = JSON.parse(headerText.toString("utf8"));
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
  tensors.sort((a, b) => a.begin - b.begin || a.end - b.end);
  let at = 0;
  for (const t of tensors) {
    if (t.begin !== at) fail(`tensor ${t.name} starts at byte ${t.begin}, not ${at}`);
    at = t.end;
  }
  if (dataStart + at !== size) fail(`its tensors end at byte ${dataStart + at} of ${size}`);
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

/** No NaN or infinity among the floats in the file's bytes [begin, end): an all-ones exponent, read from the raw
 *  bits, a chunk at a time. */
async function allFinite(handle: FileHandle, chunk: Buffer, begin: number, end: number, dtype: string): Promise<boolean> {
  const scan = FLOAT_SCANS[dtype];
  if (scan === undefined) return true;
  for (let at = begin; at < end; at += CHUNK_BYTES) {
    const length = Math.min(CHUNK_BYTES, end - at);
    await readFully(handle, chunk, length, at);
    if (!scan(chunk.buffer as ArrayBuffer, length)) return false; // allocUnsafeSlow's: never shared
  }
  return true;
}

/** `length` bytes at `position` into the start of `into`: a read may return fewer (a network file system's does). */
async function readFully(handle: FileHandle, into: Buffer, length: number, position: number): Promise<void> {
  for (let done = 0; done < length;) {
    const { bytesRead } = await handle.read(into, done, length - done, position + done);
    if (bytesRead === 0) throw new AdapterFileError(`the file ended at byte ${position + done}, before ${position + length}: it changed while it was checked`);
    done += bytesRead;
  }
}

/** Per float dtype: whether the first `length` bytes of `data` hold no all-ones exponent (typed arrays read the
 *  host's order: little-endian, as the file's, on every platform the trainer runs on). F64: each one's high word. */
const FLOAT_SCANS: Readonly<Record<string, (data: ArrayBuffer, length: number) => boolean>> = {
  F32: (data, length) => exponentsBelowMax(new Uint32Array(data, 0, length / 4), 1, 0, 0x7f800000),
  F64: (data, length) => exponentsBelowMax(new Uint32Array(data, 0, length / 4), 2, 1, 0x7ff00000),
  BF16: (data, length) => exponentsBelowMax(new Uint16Array(data, 0, length / 2), 1, 0, 0x7f80),
  F16: (data, length) => exponentsBelowMax(new Uint16Array(data, 0, length / 2), 1, 0, 0x7c00),
  // E5M2 keeps IEEE's all-ones exponent for infinities and NaN; E4M3 has no infinity, its NaN is S.1111.111
  F8_E5M2: (data, length) => exponentsBelowMax(new Uint8Array(data, 0, length), 1, 0, 0x7c),
  F8_E4M3: (data, length) => exponentsBelowMax(new Uint8Array(data, 0, length), 1, 0, 0x7f),
};

function exponentsBelowMax(values: Uint8Array | Uint16Array | Uint32Array, stride: number, first: number, mask: number): boolean {
  for (let i = first; i < values.length; i += stride) if ((values[i]! & mask) === mask) return false;
  return true;
}
