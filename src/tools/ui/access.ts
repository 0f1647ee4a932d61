// Who may read the page. Two independent checks, both optional:
//   - a token: given once as ?token=… (then kept in an HttpOnly, SameSite=Strict cookie scoped to the page's
//     path), or as `Authorization: Bearer …` for scripts; compared in constant time;
//   - the Host header against the names the server answers to. A page bound to loopback without a token is
//     otherwise readable by any web site the operator visits through DNS rebinding (the site's name re-pointed at
//     127.0.0.1): the browser would send that site's name as Host, which this check refuses.
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";

export const TOKEN_COOKIE = "rlloop_ui_token";

export type Access = { ok: true; setCookie: string | null } | { ok: false; status: 401 | 403 | 421; message: string };

export interface AccessOptions {
  token: string | null;
  /** host names (without port) accepted in the Host header; null = any */
  allowedHosts: readonly string[] | null;
  /** cookie path: the page's base path */
  basePath: string;
}

/** The host names of this machine's loopback interface. */
export const LOOPBACK_HOSTS = ["localhost", "127.0.0.1", "[::1]", "::1"] as const;

export function isLoopbackHost(host: string): boolean {
  return (LOOPBACK_HOSTS as readonly string[]).includes(host) || /^127\.\d+\.\d+\.\d+$/.test(host);
}

export function checkAccess(req: IncomingMessage, url: URL, o: AccessOptions): Access {
  if (o.allowedHosts !== null) {
    const host = hostName(req.headers.host ?? "");
    if (!o.allowedHosts.includes(host)) return { ok: false, status: 421, message: `this server does not answer to host ${JSON.stringify(host)}` };
  }
  if (o.token === null) return { ok: true, setCookie: null };
  const fromQuery = url.searchParams.get("token");
  if (fromQuery !== null && same(fromQuery, o.token)) {
    return { ok: true, setCookie: `${TOKEN_COOKIE}=${encodeURIComponent(o.token)}; HttpOnly; SameSite=Strict; Path=${o.basePath}` };
  }
  const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
  const cookie = cookies(req.headers.cookie ?? "").get(TOKEN_COOKIE);
  if ((bearer !== undefined && same(bearer, o.token)) || (cookie !== undefined && same(cookie, o.token))) return { ok: true, setCookie: null };
  return { ok: false, status: 401, message: "a token is required: open the page as …/?token=<token>" };
}

function hostName(header: string): string {
  // "[::1]:8080" → "[::1]", "localhost:8080" → "localhost"
  const bracket = /^(\[[^\]]*\])(:\d+)?$/.exec(header);
  if (bracket) return (bracket[1] as string).toLowerCase();
  return header.replace(/:\d+$/, "").toLowerCase();
}

/** Constant-time comparison of two strings of any length (their digests are compared). */
function same(a: string, b: string): boolean {
  return timingSafeEqual(createHash("sha256").update(a).digest(), createHash("sha256").update(b).digest());
}

function cookies(header: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0) {
      try {
        out.set(part.slice(0, eq).trim(), decodeURIComponent(part.slice(eq + 1).trim()));
      } catch {
        // a malformed cookie is no token
      }
    }
  }
  return out;
}
