// Whether two adapter folders hold the same adapter: then the reference log-probs of a PPO round are the policy's
// (the first round of a loop starts the policy from the reference adapter) and one frozen pass computes both.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { readFile, realpath, stat } from "node:fs/promises";
import { join } from "node:path";

const WEIGHTS = "adapter_model.safetensors";
const CONFIG = "adapter_config.json";

/** Same folder, or byte-identical weights and config (the sizes are compared first, so a differing pair is cheap). */
export async function sameAdapter(a: string, b: string): Promise<boolean> {
  if ((await realpath(a)) === (await realpath(b))) return true;
  const [sa, sb] = await Promise.all([stat(join(a, WEIGHTS)), stat(join(b, WEIGHTS))]);
  if (sa.size !== sb.size) return false;
  const [ca, cb] = await Promise.all([readFile(join(a, CONFIG)), readFile(join(b, CONFIG))]);
  if (!ca.equals(cb)) return false;
  const [ha, hb] = await Promise.all([sha256(join(a, WEIGHTS)), sha256(join(b, WEIGHTS))]);
  return ha === hb;
}

async function sha256(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}
