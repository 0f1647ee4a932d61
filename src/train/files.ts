// The trainer's output files (stats.json, valid.json, optimizer sidecars) go through the same durable write as the
// daemon's (src/files.ts): a reader never sees a torn file.
import { writeFileAtomic } from "../files.js";

export { writeFileAtomic };

export async function writeJsonAtomic(path: string, value: unknown): Promise<void> {
  await writeFileAtomic(path, JSON.stringify(value));
}
