// A row's frame: decoded with sharp to 8-bit RGB, then smart_resize + uint8 antialiased bicubic + normalise +
// patchify in the native module (qwen35.md §8: only ATen's own uint8 kernel matches transformers; sharp's resize
// does not). Alpha is dropped without compositing and grey is expanded, as PIL's Image.convert("RGB") does.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import sharp from "sharp";
import { preprocessImage, type ImagePatches, type ImageProcessorOptions } from "../native.js";
import { TrainInputError } from "./errors.js";
import { unreadableImageReason } from "./image-error.js";

/** `preprocessor_config.json` of the checkpoint → the native image processor's options. */
export async function loadImageOptions(modelDir: string): Promise<ImageProcessorOptions> {
  const path = join(modelDir, "preprocessor_config.json");
  let config: PreprocessorConfig;
  try {
    config = JSON.parse(await readFile(path, "utf8")) as PreprocessorConfig;
  } catch (err) {
    throw new TrainInputError(`--model ${modelDir}: cannot read preprocessor_config.json (${(err as Error).message})`, {
      cause: err,
    });
  }
  // Newer configs carry size.{shortest,longest}_edge (pixel counts), older ones min_pixels/max_pixels.
  const minPixels = config.size?.shortest_edge ?? config.min_pixels;
  const maxPixels = config.size?.longest_edge ?? config.max_pixels;
  if (minPixels === undefined || maxPixels === undefined) {
    throw new TrainInputError(`${path}: needs size.shortest_edge/longest_edge or min_pixels/max_pixels`);
  }
  return {
    patchSize: config.patch_size ?? 16,
    temporalPatchSize: config.temporal_patch_size ?? 2,
    mergeSize: config.merge_size ?? 2,
    minPixels,
    maxPixels,
    mean: config.image_mean ?? [0.5, 0.5, 0.5],
    std: config.image_std ?? [0.5, 0.5, 0.5],
  };
}

interface PreprocessorConfig {
  size?: { shortest_edge?: number; longest_edge?: number };
  min_pixels?: number;
  max_pixels?: number;
  patch_size?: number;
  temporal_patch_size?: number;
  merge_size?: number;
  image_mean?: [number, number, number];
  image_std?: [number, number, number];
}

export interface RgbFrame {
  rgb: Uint8Array; // H*W*3
  width: number;
  height: number;
}

/** Decodes an image file (PNG, JPEG, WebP, ...) to 8-bit RGB; `where` names the row for messages. */
export async function decodeRgb(path: string, where: string): Promise<RgbFrame> {
  try {
    const { data, info } = await sharp(path)
      .removeAlpha()
      .toColourspace("srgb")
      .raw({ depth: "uchar" })
      .toBuffer({ resolveWithObject: true });
    if (info.channels !== 3) throw new Error(`decoded to ${info.channels} channels`);
    return { rgb: new Uint8Array(data.buffer, data.byteOffset, data.byteLength), width: info.width, height: info.height };
  } catch (err) {
    const why = await unreadableImageReason(path, err);
    throw new TrainInputError(`${where}: image ${path}: cannot read (${why})`, { cause: err });
  }
}

export async function readImagePatches(path: string, options: ImageProcessorOptions, where: string): Promise<ImagePatches> {
  const frame = await decodeRgb(path, where);
  try {
    return await preprocessImage(frame.rgb, frame.width, frame.height, options);
  } catch (err) {
    throw new TrainInputError(`${where}: image ${path}: ${(err as Error).message}`, { cause: err });
  }
}
