// Durable file writes: temporary name, fsync, rename, fsync of the directory — a reader (or a restart) sees the
// old file or the new one, never a torn one. Plus sha256 of files and buffers.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { open, rename, mkdir, rm } from "node:fs/promises";
import { dirname, basename, join } from "node:path";

export async function fsyncDir(dir: string): Promise<void> {
  const handle = await open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Write `data` to `path` atomically (tmp + fsync + rename + fsync dir). */
export async function writeFileAtomic(path: string, data: string | Uint8Array): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true });
  const tmp = join(dir, `.${basename(path)}.tmp-${process.pid}`);
  const handle = await open(tmp, "w");
  try {
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, path);
  } catch (err) {
    // a full disk must not keep what it could not finish: the part written would hold the space it lacks
    await rm(tmp, { force: true }).catch(() => {});
    throw err;
  }
  await fsyncDir(dir);
}

export const sha256 = (data: string | Uint8Array): string => createHash("sha256").update(data).digest("hex");

export async function sha256File(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}
