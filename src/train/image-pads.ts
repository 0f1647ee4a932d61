// The processor's expansion of image placeholders: the chat template writes one <|image_pad|> per image and the
// Qwen3-VL processor repeats it once per LLM token of that image (gh·gw / merge², qwen35.md §2).
import { TrainInputError } from "./errors.js";

/** Repeats the i-th <|image_pad|> id counts[i] times; the number of pads must equal the number of images. */
export function expandImagePads(ids: Int32Array, padId: number, counts: number[], where: string): Int32Array {
  const pads = ids.reduce((n, id) => n + (id === padId ? 1 : 0), 0);
  if (pads !== counts.length) {
    throw new TrainInputError(`${where}: the text has ${pads} image placeholders for ${counts.length} images`);
  }
  const out = new Int32Array(ids.length - pads + counts.reduce((a, b) => a + b, 0));
  let o = 0;
  let image = 0;
  for (const id of ids) {
    if (id !== padId) {
      out[o++] = id;
      continue;
    }
    out.fill(padId, o, o + counts[image]!);
    o += counts[image++]!;
  }
  return out;
}
