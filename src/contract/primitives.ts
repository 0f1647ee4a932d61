// Field types shared by the wire schemas: ISO timestamps, sha256 digests, finite numbers, enumerations from
// `as const` tables (code → meaning), and the number codec of statistics (non-finite values survive JSON).
import { z } from "zod";

/** An ISO 8601 timestamp with offset, as `new Date().toISOString()` and Python's `datetime.isoformat()` write. */
export const isoTimestamp = () => z.iso.datetime({ offset: true, error: "must be an ISO 8601 timestamp (e.g. 2026-12-03T11:33:26.000Z)" });

/** Lower-case hex sha256 digest. */
export const sha256Hex = () => z.string().regex(/^[0-9a-f]{64}$/, { error: "must be a lower-case hex sha256 digest (64 characters)" });

/** A finite number; zod 4's z.number() refuses ±Infinity and NaN, the message says so. */
export const finite = () => z.number({ error: "must be a finite number" });

export const nonNegativeInt = () => z.number().int().min(0);

/** The enumeration of a code → meaning table, documented with the meanings. */
export function enumOf<T extends Record<string, string>>(table: T, description: string) {
  const codes = Object.keys(table) as [keyof T & string, ...(keyof T & string)[]];
  const meanings = codes.map((code) => `${code}: ${table[code]}`).join("; ");
  return z.enum(codes).meta({ description: `${description} (${meanings})` });
}

/** Codes of a table, for loops and label initialisation. */
export const codesOf = <T extends Record<string, string>>(table: T) => Object.keys(table) as (keyof T & string)[];

// ---------------------------------------------------------------------------------------------------------------
// Statistics numbers. A statistic may be NaN or ±Infinity (a diverged round) and the health gate must see it, but
// JSON has no such numbers: on the wire and in files they are the strings "NaN", "Infinity", "-Infinity". Reading
// also accepts the bare tokens Python's json.dumps writes (the seed's stats.json). src/contract/stats-codec.ts
// encodes and decodes whole records.

const NON_FINITE = ["NaN", "Infinity", "-Infinity"] as const;
// any number, NaN and ±Infinity included (z.number() refuses them); `type` tells JSON Schema what it is
const anyNumber = z.custom<number>((v) => typeof v === "number", { error: "must be a number" }).meta({ type: "number" });

/** A statistic: a number, or one of the strings "NaN", "Infinity", "-Infinity" decoded to that number. */
export const statNumber = () =>
  z.union([anyNumber, z.enum(NON_FINITE).transform(Number)]).meta({
    description: "a number; non-finite values are written as the strings \"NaN\", \"Infinity\", \"-Infinity\"",
  });
