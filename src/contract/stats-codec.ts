// The one codec of statistics records (stats.json, round and adapter events, the stats event, IPC of rank results):
// JSON in which NaN, Infinity and -Infinity are the strings "NaN", "Infinity", "-Infinity" — plain JSON.stringify
// would write null and the health gate could not tell a diverged round from a missing field. Reading also accepts
// the bare tokens Python's json.dumps writes (the seed's stats.json).
import { PpoStats } from "./stats.js";

const NON_FINITE_STRINGS = new Set(["NaN", "Infinity", "-Infinity"]);

/** JSON.stringify replacer keeping non-finite numbers as their names. */
export const statsReplacer = (_key: string, value: unknown): unknown =>
  typeof value === "number" && !Number.isFinite(value) ? String(value) : value;

/** JSON.parse reviver turning the names back into numbers. */
export const statsReviver = (_key: string, value: unknown): unknown =>
  typeof value === "string" && NON_FINITE_STRINGS.has(value) ? Number(value) : value;

/** Any value as JSON with non-finite numbers kept (the codec's text form). */
export function encodeWithNonFinite(value: unknown, indent?: number): string {
  return JSON.stringify(value, statsReplacer, indent);
}

/**
 * JSON text → value, with non-finite numbers restored: the quoted names, and the bare NaN / Infinity / -Infinity
 * tokens outside strings (Python's json.dumps). Throws SyntaxError on anything else that is not JSON.
 */
export function decodeWithNonFinite(text: string): unknown {
  return JSON.parse(quoteBareNonFinite(text), statsReviver);
}

/** A message read off the wire: its value (non-finite numbers restored), or undefined when it is not JSON — a reader
 *  (a monitor, the reloader) must never die of what it reads. */
export function decodeMessage(data: Uint8Array | string): unknown {
  try {
    return decodeWithNonFinite(typeof data === "string" ? data : new TextDecoder().decode(data));
  } catch {
    return undefined;
  }
}

/** stats.json text → a validated PpoStats; throws (SyntaxError, TypeError) with the first problem. */
export function decodeStats(text: string): PpoStats {
  const parsed = PpoStats.safeParse(decodeWithNonFinite(text));
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw new TypeError(`'${issue?.path.join(".") ?? ""}' ${issue?.message ?? "is invalid"}`);
}

export function encodeStats(stats: PpoStats): string {
  return encodeWithNonFinite(stats);
}

/**
 * Quotes NaN / Infinity tokens that stand outside string literals. Written by hand because no JSON library we
 * use reads Python's non-standard tokens; it walks the text once, skipping string literals (with escapes), so a
 * string value containing "NaN" is left alone.
 */
function quoteBareNonFinite(text: string): string {
  let out = "";
  let i = 0;
  while (i < text.length) {
    const c = text[i] as string;
    if (c === "\"") {
      const end = stringEnd(text, i);
      out += text.slice(i, end);
      i = end;
      continue;
    }
    const token = ["-Infinity", "Infinity", "NaN"].find((t) => text.startsWith(t, i));
    if (token !== undefined) {
      out += `"${token}"`;
      i += token.length;
      continue;
    }
    out += c;
    i++;
  }
  return out;
}

/** Index just past the string literal that opens at `start` (or the text's end when it is not closed). */
function stringEnd(text: string, start: number): number {
  for (let i = start + 1; i < text.length; i++) {
    if (text[i] === "\\") i++;
    else if (text[i] === "\"") return i + 1;
  }
  return text.length;
}
