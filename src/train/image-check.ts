// Up-front check that every row's frame can be opened and decoded as an image (header only, via sharp), so a
// bad path fails before the model loads instead of in the middle of an epoch.
import sharp from "sharp";
import { TrainInputError } from "./errors.js";
import { unreadableImageReason } from "./image-error.js";
import type { SftRow } from "./rows.js";

const CONCURRENCY = 16;

export async function checkImages(rows: SftRow[], source: string): Promise<void> {
  for (let i = 0; i < rows.length; i += CONCURRENCY) {
    await Promise.all(rows.slice(i, i + CONCURRENCY).map((row) => checkImage(row, source)));
  }
}

async function checkImage(row: SftRow, source: string): Promise<void> {
  try {
    const meta = await sharp(row.image).metadata();
    if (!meta.width || !meta.height) throw new Error("no image size in the header");
  } catch (err) {
    const why = await unreadableImageReason(row.image, err);
    throw new TrainInputError(`${source} line ${row.line}: image ${row.image}: cannot read (${why})`, { cause: err });
  }
}
