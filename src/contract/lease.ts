// The lease of a policy (KV bucket `rlloop`, key `<policy>.lease`): the one active daemon holds it and renews it every
// third of its TTL; each write carries the TTL (JetStream per-message TTL, nats-server 2.11+), so the server deletes
// the key once renewals stop and a standby daemon takes over. Writes are compare-and-set on the key's revision.
import { z } from "zod";
import { isoTimestamp, nonNegativeInt } from "./primitives.js";

export const LeaseRecord = z.object({
  version: z.literal(1),
  policy: z.string(),
  owner: z.string().meta({ description: "host and work dir of the holder (`<host>:<workDir>`): a daemon restarted on that work dir holds its lock, so it takes the lease over at once" }),
  instance: z.string().meta({ description: "random id of the holding daemon process" }),
  host: z.string(),
  pid: nonNegativeInt(),
  work_dir: z.string(),
  ttl_s: z.number().positive().meta({ description: "the TTL each renewal carries" }),
  acquired_at: isoTimestamp(),
  renewed_at: isoTimestamp(),
}).meta({ description: "the lease record in KV bucket rlloop, key <policy>.lease" });
export type LeaseRecord = z.infer<typeof LeaseRecord>;
