// Frames at intake (src/loop/frames.ts): which PNGs are written as they came and which are re-encoded, that a
// frame written as it came gives the trainer the same pixels and patches as its re-encoded copy, bit for bit, and
// that broken, foreign and oversized frames keep their reasons. Every frame is made here with sharp (chunks that
// sharp cannot write are spliced in by hand, with their CRC).
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { crc32 } from "node:zlib";
import { execa } from "execa";
import sharp from "sharp";
import { beforeAll, describe, expect, it } from "vitest";
import { isRolloutRejected, isTransient, RolloutRejectedError } from "../src/loop/errors.js";
import { FrameRoots, frameFileFailure } from "../src/loop/frame-roots.js";
import { framePng, reencode, withoutInlineFrames, writeFramePng, type FrameLimits } from "../src/loop/frames.js";
import { renderFrame } from "../src/tools/sim/frame.js";
import { sceneAt, scenario } from "../src/tools/sim/scenario.js";
import type { ImageProcessorOptions } from "../src/native.js";
import { decodeRgb, readImagePatches } from "../src/train/images.js";
import { python } from "./helpers/train-fixtures.js";

const LIMITS: FrameLimits = { roots: new FrameRoots([]), maxBytes: 8 << 20, maxPixels: 1_000_000, objects: null };
/** Qwen3.5's preprocessor_config.json (qwen35.md §8). */
const QWEN35_IMAGES: ImageProcessorOptions = {
  patchSize: 16, temporalPatchSize: 2, mergeSize: 2, minPixels: 65_536, maxPixels: 16_777_216, mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5],
};

// 200x150: not a multiple of 32 and under min_pixels, so the trainer's smart_resize upscales it (qwen35.md §8)
const W = 200;
const H = 150;

/** Noise with structure: every sample differs from its neighbours, so any changed value shows. */
function pixels(channels: 3 | 4): Buffer {
  const out = Buffer.alloc(W * H * channels);
  let seed = 12345;
  for (let i = 0; i < out.length; i++) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    out[i] = ((seed >>> 16) ^ (i % 251)) & 0xff;
  }
  // alpha from 0 to 255 across the frame: a reader that composited would change the colour samples
  if (channels === 4) for (let p = 0; p < W * H; p++) out[p * 4 + 3] = p % 256;
  return out;
}

/**
 * For each pair of files (a frame as it came, its re-encoded copy), whether PIL gives the same RGB array for both:
 * once through convert("RGB") (the processor's do_convert_rgb, qwen35.md §8), once through transformers'
 * load_image, which first applies the EXIF orientation (ImageOps.exif_transpose).
 */
const PIL_SAME = `
import json, sys
import numpy as np
from PIL import Image, ImageOps
def rgb(path, orient):
    im = Image.open(path)
    return np.asarray((ImageOps.exif_transpose(im) if orient else im).convert("RGB"))
def same(a, b):
    return a.shape == b.shape and bool((a == b).all())
pairs = json.loads(sys.argv[1])
print(json.dumps([[same(rgb(a, False), rgb(b, False)), same(rgb(a, True), rgb(b, True))] for a, b in pairs]))
`;

async function pilReadsSame(pairs: [string, string][]): Promise<[boolean, boolean][]> {
  const { stdout } = await execa(python(), ["-c", PIL_SAME, JSON.stringify(pairs)]);
  return JSON.parse(stdout) as [boolean, boolean][];
}

const rgbImage = () => sharp(pixels(3), { raw: { width: W, height: H, channels: 3 } });
const rgbaImage = () => sharp(pixels(4), { raw: { width: W, height: H, channels: 4 } });

function chunk(type: string, data: Buffer): Buffer {
  const body = Buffer.concat([Buffer.from(type, "latin1"), data]);
  const head = Buffer.alloc(4);
  head.writeUInt32BE(data.length);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([head, body, crc]);
}

/** The PNG with `extra` chunks right after IHDR (8-byte signature + 25-byte IHDR chunk). */
const withChunks = (png: Buffer, ...extra: Buffer[]) => Buffer.concat([png.subarray(0, 33), ...extra, png.subarray(33)]);

/** The data of the PNG's first chunk of `type`. */
function chunkData(png: Buffer, type: string): Buffer {
  for (let at = 8; at < png.length; at += 12 + png.readUInt32BE(at)) {
    if (png.toString("latin1", at + 4, at + 8) === type) return png.subarray(at + 8, at + 8 + png.readUInt32BE(at));
  }
  throw new Error(`no ${type} chunk`);
}

/** The PNG with `extra` chunks right before IEND (its last 12 bytes). */
const withChunksAtEnd = (png: Buffer, ...extra: Buffer[]) => Buffer.concat([png.subarray(0, png.length - 12), ...extra, png.subarray(png.length - 12)]);

/** The PNG without its chunks of `type`. */
function withoutChunk(png: Buffer, type: string): Buffer {
  const parts = [png.subarray(0, 8)];
  for (let at = 8; at < png.length;) {
    const end = at + 12 + png.readUInt32BE(at);
    if (png.toString("latin1", at + 4, at + 8) !== type) parts.push(png.subarray(at, end));
    at = end;
  }
  return Buffer.concat(parts);
}

const uint32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};

async function reasonOf(work: Promise<unknown>): Promise<{ reason: string; message: string } | null> {
  try {
    await work;
    return null;
  } catch (err) {
    if (!isRolloutRejected(err)) throw err;
    return { reason: err.reason, message: err.message };
  }
}

describe("frames - which frames are written as they came", () => {
  let passing: Record<string, Buffer>;
  let reencoded: Record<string, Buffer>;

  beforeAll(async () => {
    const rgb = await rgbImage().png().toBuffer();
    passing = {
      "8-bit RGB": rgb,
      "8-bit RGBA, alpha 0-255 (dropped, not composited)": await rgbaImage().png().toBuffer(),
      "the simulator's frame (8-bit RGBA)": await renderFrame(sceneAt(scenario(7, 1), 1), { width: 640, height: 480 }),
      "8-bit RGB, zlib level 9 with adaptive filtering": await rgbImage().png({ compressionLevel: 9, adaptiveFiltering: true }).toBuffer(),
      "8-bit RGB with sRGB, tEXt and tIME chunks": withChunks(rgb, chunk("sRGB", Buffer.from([0])), chunk("tEXt", Buffer.from("Software\0rollout worker", "latin1")),
        chunk("tIME", Buffer.from([0x07, 0xea, 12, 3, 11, 40, 0]))),
      "8-bit RGB with bytes after IEND (every reader stops at IEND)": Buffer.concat([rgb, Buffer.from("trailing bytes")]),
    };
    const orientation6 = await rgbImage().withMetadata({ orientation: 6 }).png().toBuffer();
    reencoded = {
      "palette": await rgbImage().png({ palette: true }).toBuffer(),
      "grey": await rgbImage().toColourspace("b-w").png().toBuffer(),
      "grey with alpha": await rgbaImage().toColourspace("b-w").png().toBuffer(),
      "16-bit RGB": await rgbImage().toColourspace("rgb16").png().toBuffer(),
      "interlaced (Adam7)": await rgbImage().png({ progressive: true }).toBuffer(),
      "ICC profile (Display P3)": await rgbImage().withIccProfile("p3").png().toBuffer(),
      "EXIF orientation 6, no ICC profile": withoutChunk(orientation6, "iCCP"),
      "EXIF without orientation": await rgbImage().withExif({ IFD0: { Copyright: "rlloop" } }).png().toBuffer(),
      "EXIF orientation 6 after the image data (unseen by a header read)": withChunksAtEnd(rgb, chunk("eXIf", chunkData(orientation6, "eXIf"))),
      "IEND cut off, image data whole": rgb.subarray(0, rgb.length - 12),
      "gAMA 1.0 (linear)": withChunks(rgb, chunk("gAMA", uint32(100_000))),
      "cHRM": withChunks(rgb, chunk("cHRM", Buffer.concat([31270, 32900, 64000, 33000, 30000, 60000, 15000, 6000].map(uint32)))),
      "tRNS colour key on RGB": withChunks(rgb, chunk("tRNS", Buffer.from([0, 1, 0, 2, 0, 3]))),
      "JPEG": await rgbImage().jpeg({ quality: 90 }).toBuffer(),
      "WebP (lossless)": await rgbImage().webp({ lossless: true }).toBuffer(),
      "WebP with alpha": await rgbaImage().webp({ lossless: true }).toBuffer(),
    };
  });

  it("passes 8-bit RGB and RGBA PNGs with only plain chunks through byte for byte", async () => {
    for (const [name, bytes] of Object.entries(passing)) {
      expect((await framePng(bytes, LIMITS)).equals(bytes), name).toBe(true);
    }
  });

  it("re-encodes every other variant as 8-bit RGB PNG", async () => {
    expect((await sharp(reencoded["EXIF orientation 6, no ICC profile"] as Buffer).metadata())).toMatchObject({ orientation: 6, hasProfile: false });
    expect((await sharp(reencoded["EXIF orientation 6 after the image data (unseen by a header read)"] as Buffer).metadata()).exif).toBeUndefined();
    for (const [name, bytes] of Object.entries(reencoded)) {
      const out = await framePng(bytes, LIMITS);
      expect(out.equals(bytes), name).toBe(false);
      expect(out.equals(await reencode(bytes, LIMITS)), `${name}: the re-encode path`).toBe(true);
      const meta = await sharp(out).metadata();
      expect({ name, ...meta }, name).toMatchObject({ name, format: "png", space: "srgb", channels: 3, depth: "uchar", isPalette: false, isProgressive: false, hasProfile: false, width: W, height: H });
      expect(meta.exif, name).toBeUndefined();
      // and what it writes passes through when it comes in again
      expect((await framePng(out, LIMITS)).equals(out), `${name}, re-encoded`).toBe(true);
    }
  });

  it("writes the frame it passes through, and the re-encoded one otherwise (tmp + rename)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "rlloop-frames-"));
    const [rgb, palette] = [passing["8-bit RGB"] as Buffer, reencoded["palette"] as Buffer];
    await writeFramePng(rgb, join(dir, "a.png"), LIMITS);
    await writeFramePng(palette, join(dir, "b.png"), LIMITS);
    expect((await readFile(join(dir, "a.png"))).equals(rgb)).toBe(true);
    expect((await readFile(join(dir, "b.png"))).equals(await reencode(palette, LIMITS))).toBe(true);
  });

  it("the trainer reads a frame written as it came exactly as its re-encoded copy: RGB values and patches", async () => {
    const dir = await mkdtemp(join(tmpdir(), "rlloop-frames-"));
    for (const [i, [name, bytes]] of Object.entries(passing).entries()) {
      const [asIs, again] = [join(dir, `${i}-as-is.png`), join(dir, `${i}-reencoded.png`)];
      await writeFramePng(bytes, asIs, LIMITS);
      await writeFile(again, await reencode(bytes, LIMITS));
      expect((await readFile(asIs)).equals(await readFile(again)), `${name}: the files differ`).toBe(false);

      const [a, b] = [await decodeRgb(asIs, name), await decodeRgb(again, name)];
      expect([a.width, a.height], name).toEqual([b.width, b.height]);
      expect(Buffer.from(a.rgb).equals(Buffer.from(b.rgb)), `${name}: decoded RGB`).toBe(true);

      const [pa, pb] = [await readImagePatches(asIs, QWEN35_IMAGES, name), await readImagePatches(again, QWEN35_IMAGES, name)];
      expect(pa.grid, name).toEqual(pb.grid);
      // bit-identical float32: compare the bytes, not the values (NaN, -0)
      const bytesOf = (f: Float32Array) => Buffer.from(f.buffer, f.byteOffset, f.byteLength);
      expect(pa.pixelValues.length, name).toBeGreaterThan(0);
      expect(bytesOf(pa.pixelValues).equals(bytesOf(pb.pixelValues)), `${name}: patches`).toBe(true);
    }
  });

  it("PIL too reads a frame written as it came as its re-encoded copy; not so with an ICC profile or EXIF orientation", async () => {
    const dir = await mkdtemp(join(tmpdir(), "rlloop-frames-"));
    const pairOf = async (label: string, bytes: Buffer): Promise<[string, string]> => {
      const [asCame, again] = [join(dir, `${label}-a.png`), join(dir, `${label}-b.png`)];
      await writeFile(asCame, bytes);
      await writeFile(again, await reencode(bytes, LIMITS));
      return [asCame, again];
    };
    const passed = Object.values(passing);
    const pairs = await Promise.all(passed.map((bytes, i) => pairOf(`pass${i}`, bytes)));
    pairs.push(await pairOf("icc", reencoded["ICC profile (Display P3)"] as Buffer), await pairOf("orientation", reencoded["EXIF orientation 6, no ICC profile"] as Buffer));
    const same = await pilReadsSame(pairs);
    expect(same.slice(0, passed.length)).toEqual(passed.map(() => [true, true]));
    // PIL ignores the ICC profile that sharp applies; load_image turns the frame the re-encoded copy keeps upright
    expect(same.slice(passed.length)).toEqual([[false, false], [true, false]]);
  });
});

describe("frames - broken, foreign and oversized frames keep their reasons", () => {
  let rgba: Buffer;
  let rgb: Buffer;
  beforeAll(async () => {
    rgb = await rgbImage().png().toBuffer();
    rgba = await rgbaImage().png().toBuffer();
  });

  it("a truncated or bit-flipped PNG, passing-through kind or not, is image_corrupt", async () => {
    const palette = await rgbImage().png({ palette: true }).toBuffer();
    const flipped = (png: Buffer, at: number) => {
      const b = Buffer.from(png);
      b[at] = (b[at] as number) ^ 0x5a;
      return b;
    };
    // the first IDAT's data starts after the signature, IHDR and sharp's pHYs chunk (8 + 25 + 21 + 8 bytes)
    const cases: Record<string, Buffer> = {
      "RGBA cut in half": rgba.subarray(0, rgba.length >> 1),
      "RGB cut in half": rgb.subarray(0, rgb.length >> 1),
      "RGB cut at 95%": rgb.subarray(0, Math.floor(rgb.length * 0.95)),
      "palette cut in half": palette.subarray(0, palette.length >> 1),
      "RGB with a flipped byte in its image data (CRC mismatch)": flipped(rgb, 62 + 200),
      "RGB cut inside its header": rgb.subarray(0, 20),
    };
    for (const [name, bytes] of Object.entries(cases)) {
      const got = await reasonOf(framePng(bytes, LIMITS));
      expect(got?.reason, name).toBe("image_corrupt");
      expect(got?.message, name).toMatch(/^png frame cannot be decoded: |^frame of \d+ bytes is not a readable PNG, JPEG or WebP: /);
    }
  });

  it("a frame is written as it came only when a full decode accepts it: every byte after the header flipped, every length cut", async () => {
    // small enough that every position is tried (~2 KB: 2 bits of noise a sample, one IDAT chunk), and tall: 256
    // rows are several of libvips' strips, so a decode that stopped early would accept a damaged last strip
    const noise = Buffer.from(pixels(3).subarray(0, 8 * 256 * 3).map((v) => 100 + (v & 3)));
    const png = await sharp(noise, { raw: { width: 8, height: 256, channels: 3 } }).png().toBuffer();
    let idat = 8;
    while (png.toString("latin1", idat + 4, idat + 8) !== "IDAT") idat += 12 + png.readUInt32BE(idat);
    const [idatData, idatEnd] = [idat + 8, idat + 12 + png.readUInt32BE(idat)];
    const variants: { bytes: Buffer; inImageData: boolean }[] = [];
    for (let at = idat; at < png.length; at++) {
      const bytes = Buffer.from(png);
      bytes[at] = (bytes[at] as number) ^ 0x5a;
      variants.push({ bytes, inImageData: at >= idatData && at < idatEnd });
    }
    for (let cut = idat; cut < png.length; cut++) variants.push({ bytes: png.subarray(0, cut), inImageData: false });
    const fullDecodeAccepts = (b: Buffer) => sharp(b, { failOn: "warning" }).raw().toBuffer().then(() => true, () => false);
    const writtenAsItCame = (b: Buffer) => framePng(b, LIMITS).then((out) => out.equals(b), () => false);
    const outcomes = await Promise.all(variants.map(async ({ bytes }) => [await fullDecodeAccepts(bytes), await writtenAsItCame(bytes)] as const));
    let asItCame = 0;
    for (const [i, [full, passed]] of outcomes.entries()) {
      const { bytes, inImageData } = variants[i] as (typeof variants)[number];
      const where = `${bytes.length} bytes, first difference at ${bytes.findIndex((x, k) => x !== png[k])}`;
      // never a frame a full decode refuses; inside the image data (its bytes and CRC) the decode alone decides
      if (passed) expect(full, where).toBe(true);
      if (inImageData) expect(passed, where).toBe(full);
      if (passed) asItCame++;
    }
    // the damage a full decode lets through (IEND's CRC) is all that is written as it came
    expect(asItCame).toBeGreaterThan(0);
    expect(asItCame).toBeLessThan(variants.length / 50);
  });

  it("a foreign format is image_format, with the format named when sharp knows it", async () => {
    const gif = await rgbImage().gif().toBuffer();
    expect(await reasonOf(framePng(gif, LIMITS))).toEqual({ reason: "image_format", message: "frame is gif, only PNG, JPEG and WebP are accepted" });
    const text = await reasonOf(framePng(Buffer.from("not an image at all"), LIMITS));
    expect(text?.reason).toBe("image_format");
    expect(text?.message).toMatch(/^frame of 19 bytes is not a readable PNG, JPEG or WebP: /);
  });

  it("a frame over frames.maxPixels is image_too_large before it is decoded", async () => {
    const small = { ...LIMITS, maxPixels: W * H - 1 };
    for (const bytes of [rgb, rgba, await rgbImage().jpeg().toBuffer()]) {
      expect(await reasonOf(framePng(bytes, small))).toEqual({
        reason: "image_too_large", message: `frame is ${W}x${H} = ${W * H} pixels, frames.maxPixels is ${W * H - 1}`,
      });
    }
  });
});

describe("frames - a frame file that cannot be looked at", () => {
  // permissions cannot be taken away from root, who runs these suites: the classification is tested on the errors
  const errno = (code: string) => Object.assign(new Error(`${code}: failed`), { code });
  it("is missing (ENOENT, ENOTDIR) or unreadable (EACCES, EPERM, ELOOP) for the rollout; anything else stays the host's, judged again later", () => {
    for (const [code, reason] of [["ENOENT", "image_missing"], ["ENOTDIR", "image_missing"], ["EACCES", "image_unreadable"], ["EPERM", "image_unreadable"], ["ELOOP", "image_unreadable"]] as const) {
      const err = frameFileFailure(errno(code), "/frames/x.png");
      expect(err).toBeInstanceOf(RolloutRejectedError);
      expect((err as RolloutRejectedError).reason, code).toBe(reason);
    }
    for (const code of ["EIO", "ENOTCONN", "ESTALE"]) { // a failing disk, a dead FUSE daemon, an NFS handle gone stale
      const err = errno(code);
      expect(frameFileFailure(err, "/frames/x.png")).toBe(err);
      expect(isTransient(err), code).toBe(true);
    }
  });
});

describe("a buffered rollout's frames", () => {
  it("inline frames' bytes are dropped once written (a round of 8 MiB frames must not stay in the heap); the rest is kept", () => {
    const step = (image: { png_base64: string } | { path: string }, i: number) => ({ name: `n${i}`, code: "1234", vllm_logp: -1, image });
    const rollout = {
      id: "r", policy: "bt", group: "g", reward: 1, adapter: { round: 0, sha256: "a".repeat(64) }, meta: {},
      steps: [step({ png_base64: "A".repeat(1 << 20) }, 0), step({ path: "cam/1.png" }, 1)],
    } as unknown as Parameters<typeof withoutInlineFrames>[0];
    const kept = withoutInlineFrames(rollout);
    expect(kept.steps.map((s) => s.image)).toEqual([{ png_base64: "" }, { path: "cam/1.png" }]);
    expect({ ...kept, steps: kept.steps.map(({ image: _, ...s }) => s) }).toEqual({ ...rollout, steps: rollout.steps.map(({ image: _, ...s }) => s) });
    expect((rollout.steps[0]!.image as { png_base64: string }).png_base64.length).toBe(1 << 20); // the event itself untouched
    const byPath = { ...rollout, steps: [rollout.steps[1]!] };
    expect(withoutInlineFrames(byPath)).toBe(byPath);
  });
});
