// Whether two adapter folders hold the same adapter: then the reference log-probs of a PPO round are the policy's
// (the first round of a loop starts the policy from the reference adapter) and one frozen pass computes both.
import { open, readFile, realpath, stat } from "node:fs/promises";
import { join } from "node:path";

const WEIGHTS = "adapter_model.safetensors";
const CONFIG = "adapter_config.json";
const CHUNK = 1 << 20;

/** Same folder, or byte-identical weights and config (sizes first, then the bytes up to the first difference). */
export async function sameAdapter(a: string, b: string): Promise<boolean> {
  if ((await realpath(a)) === (await realpath(b))) return true;
  const [sa, sb] = await Promise.all([stat(join(a, WEIGHTS)), stat(join(b, WEIGHTS))]);
  if (sa.size !== sb.size) return false;
  const [ca, cb] = await Promise.all([readFile(join(a, CONFIG)), readFile(join(b, CONFIG))]);
  return ca.equals(cb) && (await sameBytes(join(a, WEIGHTS), join(b, WEIGHTS)));
}

/** Compares two files of equal size chunk by chunk; two different adapters differ within the first chunk. */
async function sameBytes(pathA: string, pathB: string): Promise<boolean> {
  const [fa, fb] = await Promise.all([open(pathA), open(pathB)]);
  try {
    const [bufA, bufB] = [Buffer.alloc(CHUNK), Buffer.alloc(CHUNK)];
    for (let position = 0; ; position += CHUNK) {
      const [ra, rb] = await Promise.all([fa.read(bufA, 0, CHUNK, position), fb.read(bufB, 0, CHUNK, position)]);
      if (ra.bytesRead !== rb.bytesRead || !bufA.subarray(0, ra.bytesRead).equals(bufB.subarray(0, rb.bytesRead))) return false;
      if (ra.bytesRead < CHUNK) return true;
    }
  } finally {
    await Promise.all([fa.close(), fb.close()]);
  }
}
