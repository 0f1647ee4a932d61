// Frames of a rollout step → PNG files. A frame comes as {path} (under a configured frame root), {object} (in the
// frames object store) or {png_base64}; PNG, JPEG and WebP are accepted, decoded, size-checked and re-encoded as
// RGB PNG, so the trainer only ever reads clean PNGs the daemon wrote itself. Every failure is a
// RolloutRejectedError with a specific reason code.
import { realpathSync } from "node:fs";
import { readFile, rename, stat, writeFile } from "node:fs/promises";
import { isAbsolute, resolve, sep } from "node:path";
import type { ObjectStore } from "@nats-io/obj";
import sharp from "sharp";
import { RolloutRejectedError } from "./errors.js";
import type { ImageRef } from "./schema.js";

export interface FrameLimits {
  /** absolute frame roots; a {path} frame must resolve inside one of them (symlinks followed) */
  roots: readonly string[];
  maxBytes: number;
  maxPixels: number;
  /** the frames object store, opened on first use; null = {object} frames are refused as missing */
  objects: (() => Promise<ObjectStore>) | null;
}

const ACCEPTED = new Set(["png", "jpeg", "webp"]);
/** Fast zlib level: frames are re-encoded once per step at intake, where CPU is the bottleneck (bench/). */
const PNG_OPTIONS = { compressionLevel: 1, adaptiveFiltering: false } as const;

/** Read the encoded bytes of a frame, enforcing roots and frames.maxBytes. */
export async function frameBytes(image: ImageRef, limits: FrameLimits): Promise<Buffer> {
  if ("path" in image) return readFramePath(image.path, limits);
  if ("object" in image) return readFrameObject(image.object, limits);
  // base64 is 4 chars per 3 bytes: refuse before decoding a huge string
  if ((image.png_base64.length * 3) / 4 > limits.maxBytes + 3) {
    throw new RolloutRejectedError("image_too_large", `inline frame of ~${Math.floor((image.png_base64.length * 3) / 4)} bytes exceeds frames.maxBytes ${limits.maxBytes}`);
  }
  return Buffer.from(image.png_base64, "base64");
}

/** Decode, check, re-encode as PNG and write to `dest` (tmp + rename). */
export async function writeFramePng(bytes: Buffer, dest: string, limits: FrameLimits): Promise<void> {
  const png = await reencode(bytes, limits);
  const tmp = `${dest}.tmp`;
  // no fsync: a frame is re-creatable from the stream (replay), and the round's manifest is what is made durable
  await writeFile(tmp, png);
  await rename(tmp, dest);
}

export async function reencode(bytes: Buffer, limits: FrameLimits): Promise<Buffer> {
  const format = await formatOf(bytes);
  if (!ACCEPTED.has(format.name)) throw new RolloutRejectedError("image_format", `frame is ${format.name}, only PNG, JPEG and WebP are accepted`);
  if (format.width * format.height > limits.maxPixels) {
    throw new RolloutRejectedError("image_too_large", `frame is ${format.width}x${format.height} = ${format.width * format.height} pixels, frames.maxPixels is ${limits.maxPixels}`);
  }
  try {
    return await sharp(bytes, { failOn: "error", limitInputPixels: limits.maxPixels })
      .removeAlpha().toColourspace("srgb").png(PNG_OPTIONS).toBuffer();
  } catch (cause) {
    throw new RolloutRejectedError("image_corrupt", `${format.name} frame cannot be decoded: ${(cause as Error).message}`, { cause });
  }
}

async function formatOf(bytes: Buffer): Promise<{ name: string; width: number; height: number }> {
  try {
    const meta = await sharp(bytes, { limitInputPixels: false }).metadata();
    return { name: meta.format ?? "unknown", width: meta.width ?? 0, height: meta.height ?? 0 };
  } catch (cause) {
    // a known magic number whose header does not parse is a broken image; anything else is not an image at all
    const reason = hasImageMagic(bytes) ? "image_corrupt" : "image_format";
    throw new RolloutRejectedError(reason, `frame of ${bytes.length} bytes is not a readable PNG, JPEG or WebP: ${(cause as Error).message}`, { cause });
  }
}

function hasImageMagic(b: Buffer): boolean {
  const png = b.length >= 8 && b.readUInt32BE(0) === 0x89504e47;
  const jpeg = b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff;
  const webp = b.length >= 12 && b.toString("latin1", 0, 4) === "RIFF" && b.toString("latin1", 8, 12) === "WEBP";
  return png || jpeg || webp;
}

async function readFramePath(path: string, limits: FrameLimits): Promise<Buffer> {
  const root0 = limits.roots[0];
  if (root0 === undefined) throw new RolloutRejectedError("image_outside_roots", `frame path ${JSON.stringify(path)} refused: frames.roots is empty`);
  // relative paths are relative to the first root; the lexical check catches ../ escapes even for missing files
  const lexical = isAbsolute(path) ? resolve(path) : resolve(root0, path);
  if (!insideAny(lexical, limits.roots)) throw new RolloutRejectedError("image_outside_roots", `frame path ${JSON.stringify(path)} is outside frames.roots`);
  let real: string;
  try {
    real = realpathSync(lexical);
  } catch (cause) {
    throw new RolloutRejectedError("image_missing", `frame file ${lexical} does not exist`, { cause });
  }
  // a symlink inside a root may point anywhere: check the resolved target against the resolved roots
  if (!insideAny(real, limits.roots.map(realRoot))) throw new RolloutRejectedError("image_outside_roots", `frame path ${JSON.stringify(path)} resolves to ${real}, outside frames.roots`);
  const info = await stat(real);
  if (!info.isFile()) throw new RolloutRejectedError("image_missing", `frame path ${real} is not a file`);
  if (info.size > limits.maxBytes) throw new RolloutRejectedError("image_too_large", `frame file ${real} has ${info.size} bytes, frames.maxBytes is ${limits.maxBytes}`);
  return readFile(real);
}

async function readFrameObject(name: string, limits: FrameLimits): Promise<Buffer> {
  if (!limits.objects) throw new RolloutRejectedError("image_missing", `frame object ${JSON.stringify(name)}: no frames object store configured`);
  let store: ObjectStore;
  try {
    store = await limits.objects();
  } catch (cause) {
    // a bucket that does not exist holds no frame; anything else (disconnect) is not the event's fault
    if (!/not found/i.test(String((cause as Error).message))) throw cause;
    throw new RolloutRejectedError("image_missing", `frame object ${JSON.stringify(name)}: the frames object store does not exist`, { cause });
  }
  const info = await store.info(name);
  if (!info || info.deleted) throw new RolloutRejectedError("image_missing", `frame object ${JSON.stringify(name)} not found`);
  if (info.size > limits.maxBytes) throw new RolloutRejectedError("image_too_large", `frame object ${JSON.stringify(name)} has ${info.size} bytes, frames.maxBytes is ${limits.maxBytes}`);
  const data = await store.getBlob(name).catch((cause: unknown) => {
    // chunks that do not hash to the object's digest are the object's fault, not a transient one: retrying reads
    // the same chunks (nats.js names the mismatch in its message; it has no error code for it)
    if (!/corrupt object|digests do not match/i.test(String((cause as Error)?.message))) throw cause;
    throw new RolloutRejectedError("image_corrupt", `frame object ${JSON.stringify(name)}: its chunks do not match its digest`, { cause });
  });
  if (!data) throw new RolloutRejectedError("image_missing", `frame object ${JSON.stringify(name)} not found`);
  return Buffer.from(data);
}

function insideAny(path: string, roots: readonly string[]): boolean {
  return roots.some((root) => path === root || path.startsWith(root.endsWith(sep) ? root : root + sep));
}

function realRoot(root: string): string {
  try {
    return realpathSync(root);
  } catch {
    return root;
  }
}
