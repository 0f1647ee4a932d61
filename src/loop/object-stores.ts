// Every NATS object store the daemon opens comes from here. The client verifies each object's SHA-256 as it puts or
// gets it, with a pure-JS hash by default (browser-safe); on Node the library's documented switch to node:crypto
// makes that native, which is most of the cost of moving a 9B adapter's continuation (~0.5 GB): bench/object-upload.ts.
import type { NatsConnection } from "@nats-io/nats-core";
import { Objm, setSha256Backend } from "@nats-io/obj";

export function objectStores(nc: NatsConnection): Objm {
  setSha256Backend("native"); // process-wide and idempotent; before the first object store operation
  return new Objm(nc);
}
