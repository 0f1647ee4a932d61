// The one redaction mechanism of rlloop: every log line (src/log.ts), every error the CLI prints, every config a
// command logs or answers over NATS goes through it. Secrets are recognised two ways: by the key they sit under
// (passwords, tokens, nkey seeds, api keys, the trainer's environment), and by value — the secrets a command was
// given are registered when it loads its config or flags, and every string is scrubbed of them and of credentials
// written into URLs (`nats://user:pass@host`), wherever they appear (an error message, a command line).

const HIDDEN = "[redacted]";
/** Keys whose values are secrets wherever they appear. */
const SECRET_KEYS = new Set(["pass", "password", "token", "nkeySeed", "nkey_seed", "seed_key", "apiKey", "api_key", "authorization", "jwt"]);
/** Keys whose object values hold secrets in every value (environment maps). */
const SECRET_MAPS = new Set(["env"]);
const MAX_DEPTH = 8;
const secrets = new Set<string>();

/** Values shorter than this are not registered: scrubbing them would mangle ordinary text. */
const MIN_SECRET_LENGTH = 4;

/** Registers values to scrub from every string from now on (a password, a token, an environment value). */
export function registerSecrets(...values: Array<string | null | undefined>): void {
  for (const value of values) if (value && value.length >= MIN_SECRET_LENGTH) secrets.add(value);
}

/** `text` without URL credentials and registered secrets. */
export function scrub(text: string): string {
  let out = text.replace(/(\/\/)[^@/\s]*@/g, `$1${HIDDEN}@`);
  for (const secret of secrets) if (out.includes(secret)) out = out.split(secret).join(HIDDEN);
  return out;
}

/** A copy of `value` safe to log: strings scrubbed, secret keys replaced, errors as plain objects; depth-bounded. */
export function scrubValue(value: unknown, depth = 0): unknown {
  if (typeof value === "string") return scrub(value);
  if (value === null || typeof value !== "object") return value;
  if (depth >= MAX_DEPTH) return "[deep]";
  if (value instanceof Error) return scrubError(value, depth);
  if (Array.isArray(value)) return value.map((v) => scrubValue(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value)) {
    if (SECRET_KEYS.has(key)) out[key] = child === null || child === undefined ? child : HIDDEN;
    else if (SECRET_MAPS.has(key) && child !== null && typeof child === "object" && !Array.isArray(child)) out[key] = Object.fromEntries(Object.keys(child).map((k) => [k, HIDDEN]));
    else out[key] = scrubValue(child, depth + 1);
  }
  return out;
}

function scrubError(err: Error, depth: number): Record<string, unknown> {
  const plain: Record<string, unknown> = { type: err.name, message: scrub(err.message) };
  if (err.stack) plain.stack = scrub(err.stack);
  for (const [key, child] of Object.entries(err)) if (!(key in plain)) plain[key] = scrubValue(child, depth + 1);
  if (err.cause !== undefined) plain.cause = scrubValue(err.cause, depth + 1);
  return plain;
}
