// How the loop's processes authenticate to NATS: one method from the config — user/password, token, an nkey seed or
// a `.creds` file (JWT + nkey seed) — or credentials written into `nats.url` (`nats://user:pass@host`,
// `nats://token@host`), which nats.js ignores: they are taken out of the URLs and used as if configured, so the
// client never sees them (nor can an error message carry them). This file holds no TLS (connection.ts) and no
// redaction (the config's secrets are registered where the config is parsed).
import { readFileSync } from "node:fs";
import { credsAuthenticator, nkeyAuthenticator, nkeys, type Authenticator } from "@nats-io/nats-core";
import type { Config } from "./config/index.js";
import { ConfigError } from "./errors.js";

export interface NatsAuth {
  /** server URLs without credentials */
  servers: string[];
  user?: string;
  pass?: string;
  token?: string;
  authenticator?: Authenticator;
  /** the method in words, with the config fields it came from, for error messages */
  method: string;
}

/** The servers and credentials of `url` under the config's `nats` section; a contradiction is a ConfigError. */
export function natsAuth(nats: Config["nats"], url: string): NatsAuth {
  const parsed = url.split(",").map((s) => s.trim()).filter(Boolean).map(splitCredentials);
  const servers = parsed.map((p) => p.server);
  const inUrl = parsed.map((p) => p.credentials).filter((c): c is UrlCredentials => c !== null);
  const distinct = new Set(inUrl.map((c) => JSON.stringify(c)));
  if (distinct.size > 1) throw new ConfigError("'nats.url' lists servers with different credentials: one connection has one identity (set nats.user/nats.pass or nats.token once instead)");
  const fromUrl = inUrl[0] ?? null;
  const configured = [
    nats.user !== null || nats.pass !== null ? "nats.user/nats.pass" : null,
    nats.token !== null ? "nats.token" : null,
    nats.nkeySeed !== null ? "nats.nkeySeed" : null,
    nats.credsFile !== null ? "nats.credsFile" : null,
    fromUrl ? "credentials in nats.url" : null,
  ].filter((m): m is string => m !== null);
  if (configured.length > 1) throw new ConfigError(`NATS credentials are given ${configured.length} ways (${configured.join(", ")}): set exactly one`);

  if (fromUrl?.kind === "userPass") return { servers, user: fromUrl.user, pass: fromUrl.pass, method: "user/password written in nats.url (better: nats.user and nats.pass, or RLLOOP_NATS_PASS)" };
  if (fromUrl?.kind === "token") return { servers, token: fromUrl.token, method: "token written in nats.url (better: nats.token, or RLLOOP_NATS_TOKEN)" };
  if (nats.user !== null || nats.pass !== null) {
    if (nats.user === null || nats.pass === null) throw new ConfigError(`'nats.user' and 'nats.pass' go together, got only ${nats.user === null ? "nats.pass" : "nats.user"}`);
    return { servers, user: nats.user, pass: nats.pass, method: `user/password of user ${JSON.stringify(nats.user)} (nats.user, nats.pass)` };
  }
  if (nats.token !== null) return { servers, token: nats.token, method: "token (nats.token)" };
  if (nats.nkeySeed !== null) return { servers, authenticator: nkeyAuthenticator(userSeed(nats.nkeySeed)), method: "nkey (nats.nkeySeed)" };
  if (nats.credsFile !== null) return { servers, authenticator: credsAuthenticator(readCreds(nats.credsFile)), method: `creds file ${nats.credsFile} (nats.credsFile)` };
  return { servers, method: "no credentials (a server that wants them needs nats.user/nats.pass, nats.token, nats.nkeySeed or nats.credsFile)" };
}

type UrlCredentials = { kind: "userPass"; user: string; pass: string } | { kind: "token"; token: string };

/** `nats://user:pass@host:4222` → the URL without its userinfo, and what the userinfo held. */
function splitCredentials(server: string): { server: string; credentials: UrlCredentials | null } {
  const at = /^([a-z][a-z0-9+.-]*:\/\/)?([^@/]*)@(.*)$/i.exec(server);
  if (!at) return { server, credentials: null };
  const [, scheme = "", userinfo = "", rest = ""] = at;
  const clean = `${scheme}${rest}`;
  const colon = userinfo.indexOf(":");
  const decode = (part: string) => {
    try {
      return decodeURIComponent(part);
    } catch {
      throw new ConfigError("'nats.url' holds credentials that are not valid URL encoding (percent-encode special characters, or use nats.user/nats.pass)");
    }
  };
  if (colon < 0) return { server: clean, credentials: userinfo === "" ? null : { kind: "token", token: decode(userinfo) } };
  return { server: clean, credentials: { kind: "userPass", user: decode(userinfo.slice(0, colon)), pass: decode(userinfo.slice(colon + 1)) } };
}

/** The seed as nats.js wants it, checked here so a typo fails at start with the field's name, not in a handshake. */
function userSeed(seed: string): Uint8Array {
  const bytes = new TextEncoder().encode(seed.trim());
  try {
    const pair = nkeys.fromSeed(bytes);
    if (!pair.getPublicKey().startsWith("U")) throw new Error("not a user seed");
  } catch {
    throw new ConfigError("'nats.nkeySeed' must be a user nkey seed (SU…, as `nsc` or `nk -gen user` writes it)");
  }
  return bytes;
}

function readCreds(file: string): Uint8Array {
  try {
    return readFileSync(file);
  } catch (cause) {
    throw new ConfigError(`'nats.credsFile' ${file} cannot be read: ${(cause as NodeJS.ErrnoException).code ?? (cause as Error).message}`, { cause });
  }
}
