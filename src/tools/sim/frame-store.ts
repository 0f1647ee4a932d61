// Writes simulated frames under a frame root so events can refer to them by {path}, as a rollout worker sharing
// a filesystem with the daemon would. Each file is written to a temporary name and renamed: the daemon may read
// a frame the moment its event arrives and must never see half a PNG.
import { mkdir, rename, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";

/** Returns a store that writes `relative` under `root` and answers the absolute path. */
export function frameStore(root: string): (relative: string, png: Buffer) => Promise<string> {
  const base = resolve(root);
  return async (relative, png) => {
    const file = join(base, relative);
    if (!file.startsWith(base + "/")) throw new RangeError(`frame path ${JSON.stringify(relative)} escapes the frame root ${base}`);
    await mkdir(dirname(file), { recursive: true });
    const tmp = `${file}.tmp-${process.pid}`;
    await writeFile(tmp, png);
    await rename(tmp, file);
    return file;
  };
}
