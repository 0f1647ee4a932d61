// Why a frame could not be read, in words. sharp is not a reliable witness for a missing file: it decides
// "missing" by matching the text of libvips' error buffer, which is process-wide and shared by its worker threads,
// so under concurrent decodes the same missing path sometimes comes back as "unsupported image format". The file
// system is asked instead.
import { stat } from "node:fs/promises";

export async function unreadableImageReason(path: string, err: unknown): Promise<string> {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === "ENOENT") return "no such file";
  const found = await stat(path).catch((statErr: NodeJS.ErrnoException) => statErr);
  if (found instanceof Error) return found.code === "ENOENT" ? "no such file" : found.message;
  if (found.isDirectory()) return "is a directory";
  return (err as Error).message;
}
