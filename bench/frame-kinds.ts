// The kinds of frame the intake benches feed the daemon (--kind): the simulator's own 8-bit RGBA PNGs, which
// intake writes as they came, and the encodings it re-encodes (RGB and palette PNGs, JPEG).
import sharp from "sharp";

/** kind → file extension */
export const FRAME_KINDS = { sim: "png", rgb: "png", palette: "png", jpeg: "jpg" } as const;
export type FrameKind = keyof typeof FRAME_KINDS;

export function frameKind(arg: string | undefined): FrameKind {
  if (arg === undefined || !(arg in FRAME_KINDS)) throw new Error(`--kind must be one of ${Object.keys(FRAME_KINDS).join(", ")}, got ${JSON.stringify(arg)}`);
  return arg as FrameKind;
}

/** The simulator's PNG as `kind`. */
export async function encodeAs(kind: FrameKind, png: Buffer): Promise<Buffer> {
  switch (kind) {
    case "sim":
      return png;
    case "rgb":
      return sharp(png).removeAlpha().png().toBuffer();
    case "palette":
      return sharp(png).png({ palette: true }).toBuffer();
    case "jpeg":
      return sharp(png).jpeg({ quality: 90 }).toBuffer();
  }
}
