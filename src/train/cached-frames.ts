// The collator's side of the model's vision-feature cache (native VisionCache): a frame already run through the
// frozen vision tower in this job is sent as its key and grid, without decoding or preprocessing it again. The key
// is the frame's path, inode, size, mtime and ctime (nanoseconds), so a rewritten or replaced file is a new key
// even when a copy tool restores its mtime (ctime cannot be set back). The grid is remembered from the frame's
// first preprocessing (the image-pad expansion of the row needs it).
import { stat } from "node:fs/promises";
import type { ImageInput, Model } from "../native.js";

type Grid = ImageInput["grid"];

export class CachedFrames {
  private readonly grids = new Map<string, Grid>();

  constructor(private readonly model: Pick<Model, "visionCached">) {}

  /** The frame's cache key, or null when it cannot be read (the collator then reports the error as usual). */
  async key(path: string): Promise<string | null> {
    try {
      const s = await stat(path, { bigint: true });
      return `${path}|${s.dev}:${s.ino}|${s.size}|${s.mtimeNs}|${s.ctimeNs}`;
    } catch {
      return null;
    }
  }

  /** The image without pixels when the model holds its features. */
  lookup(key: string): ImageInput | null {
    const grid = this.grids.get(key);
    return grid && this.model.visionCached(key) ? { grid, cacheKey: key } : null;
  }

  remember(key: string, grid: Grid): void {
    this.grids.set(key, grid);
  }
}
