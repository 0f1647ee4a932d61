// Frames of a rollout step → PNG files. A frame comes as {path} (under a configured frame root), {object} (in the
// frames object store) or {png_base64}; PNG, JPEG and WebP are accepted, and every frame is fully decoded and
// size-checked before it is written. A PNG whose decoded samples already are the trainer's RGB values (8-bit
// RGB or RGBA, no palette, no interlacing, no colour-management or orientation data, see passesThrough) is
// written as it came; anything else is re-encoded as RGB PNG, so the trainer only ever reads plain 8-bit sRGB
// PNGs. Every failure is a RolloutRejectedError with a specific reason code.
import { rename, rm, writeFile } from "node:fs/promises";
import sharp from "sharp";
import { RolloutRejectedError } from "./errors.js";
import type { FrameRoots } from "./frame-roots.js";
import { readFrameObject, type FrameObjects } from "./frame-objects.js";
import type { ImageRef, RolloutCompleted } from "../contract/index.js";

export interface FrameLimits {
  /** the frame roots; a {path} frame must resolve inside one of them (symlinks followed) */
  roots: FrameRoots;
  maxBytes: number;
  maxPixels: number;
  /** the frames object store, opened on first use; null = {object} frames are refused as missing */
  objects: (() => Promise<FrameObjects>) | null;
}

const ACCEPTED = new Set(["png", "jpeg", "webp"]);
/** The longest side over the shortest that Qwen's smart_resize accepts (native/src/vision/preprocess.cpp). */
const MAX_ASPECT = 200;
/** Fast zlib level: frames are re-encoded once per step at intake, where CPU is the bottleneck (bench/). */
const PNG_OPTIONS = { compressionLevel: 1, adaptiveFiltering: false } as const;
/**
 * Chunks a PNG written as it came may carry: the header, the image data and its end, sRGB (it only confirms what
 * the trainer assumes), density, text and time; none of them touches a pixel value. Any other chunk sends the
 * frame to the re-encode: gAMA, cHRM, cICP and sBIT say the samples are not plain sRGB (libvips neither reports
 * nor applies them, so the trainer takes the samples as sRGB, where a colour-managed reader would convert them; a
 * re-encoded frame carries none), tRNS and bKGD ask for compositing, eXIf may hold an orientation, APNG's chunks
 * more frames, and an unknown chunk is not known to be harmless.
 */
const PLAIN_CHUNKS = new Set(["IHDR", "IDAT", "IEND", "sRGB", "pHYs", "tEXt", "zTXt", "iTXt", "tIME"]);

// One libvips worker per image: libuv's pool already runs 4 frames at once, and more threads per image only add
// hand-offs (bench/frames.ts on 2 cores: concurrency 2 costs a median 25 % more CPU a frame on either path). sharp
// already picks 1 on glibc without jemalloc; elsewhere it would take the core count. Process-wide: besides
// frames it only reaches the simulator `rlloop demo` runs beside the daemon; the trainer decodes in its own
// processes, which do not load this file.
sharp.concurrency(1);

/** Read the encoded bytes of a frame, enforcing roots and frames.maxBytes. */
export async function frameBytes(image: ImageRef, limits: FrameLimits): Promise<Buffer> {
  if ("path" in image) return limits.roots.read(image.path, limits.maxBytes);
  if ("object" in image) {
    if (!limits.objects) throw new RolloutRejectedError("image_missing", `frame object ${JSON.stringify(image.object)}: no frames object store configured`);
    return readFrameObject(image.object, limits.objects, limits.maxBytes);
  }
  // base64 is 4 chars per 3 bytes: refuse before decoding a huge string
  if ((image.png_base64.length * 3) / 4 > limits.maxBytes + 3) {
    throw new RolloutRejectedError("image_too_large", `inline frame of ~${Math.floor((image.png_base64.length * 3) / 4)} bytes exceeds frames.maxBytes ${limits.maxBytes}`);
  }
  return Buffer.from(image.png_base64, "base64");
}

/**
 * The rollout as a round keeps it once its frames are written to incoming/: inline frames' bytes dropped (an empty
 * png_base64 stands for them). Nothing after admission reads a frame from the event (a round's rows name the
 * incoming files, replay reads the stream). The held messages keep their payloads until acked (one payload each,
 * up to consumer.maxAckPending of them); without this, every inline frame of the open and the training round would
 * be in memory twice, the second time as a base64 string on the JS heap.
 */
export function withoutInlineFrames(rollout: RolloutCompleted): RolloutCompleted {
  if (!rollout.steps.some((step) => "png_base64" in step.image)) return rollout;
  return { ...rollout, steps: rollout.steps.map((step) => ("png_base64" in step.image ? { ...step, image: { png_base64: "" } } : step)) };
}

/** Decode, check and write the frame's PNG (framePng) to `dest` (tmp + rename). */
export async function writeFramePng(bytes: Buffer, dest: string, limits: FrameLimits): Promise<void> {
  const png = await framePng(bytes, limits);
  const tmp = `${dest}.tmp`;
  // no fsync: a frame is re-creatable from the stream (replay), and the round's manifest is what is made durable
  try {
    await writeFile(tmp, png);
    await rename(tmp, dest);
  } catch (err) {
    await rm(tmp, { force: true }).catch(() => {}); // a full disk keeps no part of it: the space is what it lacks
    throw err;
  }
}

/** The PNG to write for a frame, after a full decode: `bytes` itself when it passes through, else reencode's. */
export async function framePng(bytes: Buffer, limits: FrameLimits): Promise<Buffer> {
  const meta = await checkedHeader(bytes, limits);
  if (!passesThrough(meta, bytes)) return encode(bytes, meta, limits);
  try {
    await decodeToLastPixel(bytes, meta, limits);
    return bytes;
  } catch {
    // broken, or readable only with warnings: the re-encode path decides, with today's reasons and messages
    return encode(bytes, meta, limits);
  }
}

/**
 * Decodes every row of a non-interlaced PNG and keeps only its last pixel. The rows are one zlib stream, read in
 * order (libvips loads PNG sequentially; inflating the last row needs every byte before it), so each row is
 * inflated, unfiltered and CRC-checked as in a full decode, without the full-size output buffer (1.2 MB for a
 * 640x480 RGBA frame: its allocation, page faults and copy were a third of the decode's CPU, bench/frames.ts).
 * test/loop-frames.test.ts checks that it refuses exactly what a full decode refuses. failOn "warning" is sharp's
 * default, the strictness the trainer decodes with (src/train/images.ts): a frame written as it came must open
 * there as it did here.
 */
async function decodeToLastPixel(bytes: Buffer, meta: sharp.Metadata, limits: FrameLimits): Promise<void> {
  const [width, height] = [meta.width ?? 0, meta.height ?? 0];
  await sharp(bytes, { failOn: "warning", limitInputPixels: limits.maxPixels })
    .extract({ left: width - 1, top: height - 1, width: 1, height: 1 }).raw().toBuffer();
}

/** Decode, check and re-encode as RGB PNG, whatever the input. */
export async function reencode(bytes: Buffer, limits: FrameLimits): Promise<Buffer> {
  return encode(bytes, await checkedHeader(bytes, limits), limits);
}

/**
 * True for a PNG the trainer reads exactly as it reads its re-encoded copy: decodeRgb (src/train/images.ts) takes
 * 8-bit sRGB samples as they are and drops an alpha channel without compositing (as PIL's convert("RGB") does),
 * and so does the re-encode here, so RGB and RGBA give the same pixels either way (test/loop-frames.test.ts).
 * Every variant whose samples need converting is re-encoded, so that the conversion is done once, here, by
 * libvips, and the written frame does not depend on its reader's converter: palette (a lookup), grey (an
 * expansion), 16-bit (a reduction to 8 bits), an ICC profile (a colour transform: libvips applies it, PIL does
 * not). The re-encode drops EXIF, so a frame that has any is re-encoded: a reader that honours its orientation
 * (transformers' load_image) would turn it. Interlaced frames are re-encoded because libvips decodes Adam7 in
 * full into memory before the first row, on every training read, and decodeToLastPixel needs rows in order.
 */
function passesThrough(meta: sharp.Metadata, bytes: Buffer): boolean {
  return meta.format === "png" && meta.space === "srgb" && meta.depth === "uchar" && meta.bitsPerSample === 8
    && (meta.channels === 3 || meta.channels === 4) && meta.isPalette !== true && meta.isProgressive !== true
    && meta.hasProfile !== true && meta.exif === undefined && onlyPlainChunks(bytes);
}

/**
 * Walks the chunk list (after the 8-byte signature: length, type, data, CRC each) up to IEND, reading only lengths
 * and types. Hand-read because sharp's metadata reports none of the chunks PLAIN_CHUNKS leaves out but iCCP and
 * eXIf, and reads only the header, where an eXIf after the image data is not seen. A list that runs off the
 * end (a truncated file) is not plain either: the re-encode path then decides, and what it writes is whole.
 */
function onlyPlainChunks(png: Buffer): boolean {
  for (let at = 8; at + 12 <= png.length;) {
    const type = png.toString("latin1", at + 4, at + 8);
    if (!PLAIN_CHUNKS.has(type)) return false;
    if (type === "IEND") return true;
    at += 12 + png.readUInt32BE(at);
  }
  return false;
}

async function checkedHeader(bytes: Buffer, limits: FrameLimits): Promise<sharp.Metadata> {
  const meta = await metadataOf(bytes);
  const name = meta.format ?? "unknown";
  if (!ACCEPTED.has(name)) throw new RolloutRejectedError("image_format", `frame is ${name}, only PNG, JPEG and WebP are accepted`);
  const pixels = (meta.width ?? 0) * (meta.height ?? 0);
  if (pixels > limits.maxPixels) {
    throw new RolloutRejectedError("image_too_large", `frame is ${meta.width}x${meta.height} = ${pixels} pixels, frames.maxPixels is ${limits.maxPixels}`);
  }
  // Qwen's image processor refuses more (qwen35.md §8): such a frame would fail every training attempt of its round
  const [long, short] = [Math.max(meta.width ?? 0, meta.height ?? 0), Math.min(meta.width ?? 0, meta.height ?? 0)];
  if (long > MAX_ASPECT * short) {
    throw new RolloutRejectedError("image_shape", `frame is ${meta.width}x${meta.height}: its aspect ratio is over ${MAX_ASPECT}, which the model's image processor refuses`);
  }
  return meta;
}

async function encode(bytes: Buffer, meta: sharp.Metadata, limits: FrameLimits): Promise<Buffer> {
  try {
    return await sharp(bytes, { failOn: "error", limitInputPixels: limits.maxPixels })
      .removeAlpha().toColourspace("srgb").png(PNG_OPTIONS).toBuffer();
  } catch (cause) {
    throw new RolloutRejectedError("image_corrupt", `${meta.format} frame cannot be decoded: ${(cause as Error).message}`, { cause });
  }
}

async function metadataOf(bytes: Buffer): Promise<sharp.Metadata> {
  try {
    return await sharp(bytes, { limitInputPixels: false }).metadata();
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
