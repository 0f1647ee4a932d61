// The nesting depth of JSON text, measured on the bytes before anything parses them: a rollout nested thousands of
// levels deep parses fine (V8's JSON.parse is iterative) but overflows the stack of every recursive consumer after
// it (JSON.stringify, loggers, error messages). Written by hand because no JSON library reports depth without
// building the value; one pass, no allocation, string literals (with escapes) skipped.

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN = new Set([0x5b, 0x7b]); // [ {
const CLOSE = new Set([0x5d, 0x7d]); // ] }

/** Whether `data` nests deeper than `max` arrays/objects (stops scanning as soon as it does). */
export function nestsDeeperThan(data: Uint8Array, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < data.length; i++) {
    const b = data[i] as number;
    if (inString) {
      if (b === BACKSLASH) i++;
      else if (b === QUOTE) inString = false;
    } else if (b === QUOTE) {
      inString = true;
    } else if (OPEN.has(b)) {
      if (++depth > max) return true;
    } else if (CLOSE.has(b)) {
      depth--;
    }
  }
  return false;
}
