// Renders a simulated camera frame: an SVG of the scene (floor, horizon, distractor, target) rasterised by sharp
// into a real PNG of the requested size. No text (fonts differ between machines; the pixels must not).
import sharp from "sharp";
import type { Scene, ShapeKind } from "./scenario.js";

export interface FrameSize {
  width: number;
  height: number;
}

export async function renderFrame(scene: Scene, size: FrameSize): Promise<Buffer> {
  return sharp(Buffer.from(sceneSvg(scene, size))).png({ compressionLevel: 6 }).toBuffer();
}

export function sceneSvg(scene: Scene, { width, height }: FrameSize): string {
  const horizon = Math.round(height * 0.45);
  const r = Math.max(2, Math.round(scene.size * Math.min(width, height)));
  const target = shape(scene.target.kind, scene.x * width, scene.y * height, r, scene.target.colour);
  const d = scene.distractor;
  const distractor = shape(d.kind, d.x * width, d.y * height, Math.round(r * 0.7), d.colour);
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">`,
    `<defs><linearGradient id="floor" x1="0" y1="0" x2="0" y2="1">`,
    `<stop offset="0" stop-color="#9c8f7a"/><stop offset="1" stop-color="#5d5345"/></linearGradient></defs>`,
    `<rect width="${width}" height="${horizon}" fill="${scene.background}"/>`,
    `<rect y="${horizon}" width="${width}" height="${height - horizon}" fill="url(#floor)"/>`,
    distractor,
    `<ellipse cx="${fmt(scene.x * width)}" cy="${fmt(scene.y * height + r)}" rx="${r}" ry="${Math.max(1, Math.round(r / 4))}" fill="#000" fill-opacity="0.25"/>`,
    target,
    `</svg>`,
  ].join("");
}

function shape(kind: ShapeKind, cx: number, cy: number, r: number, colour: string): string {
  const stroke = `stroke="#222" stroke-width="2"`;
  switch (kind) {
    case "circle":
      return `<circle cx="${fmt(cx)}" cy="${fmt(cy)}" r="${r}" fill="${colour}" ${stroke}/>`;
    case "square":
      return `<rect x="${fmt(cx - r)}" y="${fmt(cy - r)}" width="${2 * r}" height="${2 * r}" fill="${colour}" ${stroke}/>`;
    case "triangle":
      return `<polygon points="${fmt(cx)},${fmt(cy - r)} ${fmt(cx + r)},${fmt(cy + r)} ${fmt(cx - r)},${fmt(cy + r)}" fill="${colour}" ${stroke}/>`;
  }
}

function fmt(value: number): string {
  return value.toFixed(1);
}
