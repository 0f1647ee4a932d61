// Whether a failed first connection to NATS is permanent — refused credentials, a server certificate this client
// does not trust, a client certificate the server does not accept, TLS on one side only — and the one-line reason,
// or transient (the server is not up yet: the daemon waits for it). A permanent failure would repeat forever, so the
// start ends with it instead of waiting.
//
// nats.js reports refused credentials (AuthorizationError) and an untrusted server certificate (the TLS error's
// code) itself. A client certificate the server refuses is a TLS alert that arrives after the handshake, which
// nats.js drops: the connect just times out. For that case the server is asked again here, by hand: its INFO line
// (plain JSON, sent before TLS) says what it requires, and a TLS handshake with the same files shows the alert.
import { connect as netConnect, isIP, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { readFileSync } from "node:fs";
import { errors } from "@nats-io/nats-core";
import type { Config } from "./config/index.js";

/** Node's codes for a server certificate that does not verify (openssl's X509 errors and node's name check). */
const UNTRUSTED_SERVER = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE", "SELF_SIGNED_CERT_IN_CHAIN", "DEPTH_ZERO_SELF_SIGNED_CERT", "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY", "CERT_HAS_EXPIRED", "CERT_NOT_YET_VALID", "CERT_UNTRUSTED", "CERT_REJECTED",
  "CERT_SIGNATURE_FAILURE", "ERR_TLS_CERT_ALTNAME_INVALID", "INVALID_CA", "CERT_REVOKED",
]);
/** TLS alerts a server sends when it does not accept the client's certificate (or wants one). */
const REFUSED_CLIENT_CERT = new Set([
  "ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED", "ERR_SSL_TLSV1_ALERT_UNKNOWN_CA", "ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE",
  "ERR_SSL_SSLV3_ALERT_CERTIFICATE_UNKNOWN", "ERR_SSL_SSLV3_ALERT_CERTIFICATE_EXPIRED", "ERR_SSL_TLSV1_ALERT_DECRYPT_ERROR",
  "ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE", "ERR_SSL_TLSV1_ALERT_ACCESS_DENIED",
]);
const PROBE_MS = 3000;

export interface FailedConnect {
  /** the URL as it may be shown (no credentials) */
  shownUrl: string;
  /** the first server, host and port, to ask again */
  server: string;
  /** the authentication method in words (nats-auth.ts) */
  method: string;
  tls: Config["nats"]["tls"];
}

/** The reason a first connection can never succeed as configured, or null when waiting may help. */
export async function permanentFailure(err: unknown, at: FailedConnect): Promise<string | null> {
  if (err instanceof errors.AuthorizationError || err instanceof errors.UserAuthenticationExpiredError) {
    return `NATS at ${at.shownUrl} refused the connection's credentials, ${at.method}: ${err.message}`;
  }
  const code = (err as NodeJS.ErrnoException | null)?.code;
  if (typeof code === "string" && UNTRUSTED_SERVER.has(code)) {
    return `the TLS certificate of NATS at ${at.shownUrl} is not trusted (${(err as Error).message}): nats.tls.ca must name the CA that signed it`;
  }
  if (err instanceof errors.ConnectionError && (err.cause as NodeJS.ErrnoException | undefined)?.code === "ECONNREFUSED") return null;
  const probe = await probeServer(at.server, at.tls);
  if (probe === null) return null;
  if (probe.info.tls_required && at.tls === null && !probe.tlsTried) return `NATS at ${at.shownUrl} requires TLS: set nats.tls (at least {"ca": <the CA file>})`;
  if (!probe.info.tls_required && !probe.info.tls_available && at.tls !== null) return `NATS at ${at.shownUrl} offers no TLS, but nats.tls is set: use a TLS listener or set nats.tls to null`;
  if (probe.alert && REFUSED_CLIENT_CERT.has(probe.alert.code)) {
    return at.tls?.cert
      ? `NATS at ${at.shownUrl} did not accept the client certificate ${at.tls.cert} (TLS alert: ${probe.alert.text}): it must be signed by a CA the server trusts`
      : `NATS at ${at.shownUrl} requires a client certificate (TLS verify; alert: ${probe.alert.text}): set nats.tls.cert and nats.tls.key`;
  }
  return null;
}

interface Probe {
  info: { tls_required?: boolean; tls_available?: boolean; tls_verify?: boolean };
  tlsTried: boolean;
  alert: { code: string; text: string } | null;
}

/** The server's INFO and, when TLS is in play, the alert its handshake ends with; null when it does not answer. */
async function probeServer(server: string, tls: Config["nats"]["tls"]): Promise<Probe | null> {
  const { host, port } = hostPort(server);
  const socket = netConnect(port, host);
  try {
    const info = await withTimeout(readInfo(socket), PROBE_MS);
    if (info === null) return null;
    if (!info.tls_required && !(info.tls_available && tls !== null)) return { info, tlsTried: false, alert: null };
    if (tls === null) return { info, tlsTried: false, alert: null };
    const alert = await withTimeout(tlsAlert(socket, host, tls), PROBE_MS);
    return { info, tlsTried: true, alert };
  } finally {
    socket.destroy();
  }
}

/** The first protocol line, `INFO {json}` (the NATS protocol's greeting). */
function readInfo(socket: Socket): Promise<Probe["info"] | null> {
  return new Promise((resolve) => {
    let text = "";
    const done = (value: Probe["info"] | null) => {
      socket.removeAllListeners("data");
      resolve(value);
    };
    socket.on("data", (chunk: Buffer) => {
      text += chunk.toString("utf8");
      const end = text.indexOf("\r\n");
      if (end < 0) return text.length > 64 * 1024 ? done(null) : undefined;
      const line = text.slice(0, end);
      try {
        done(line.startsWith("INFO ") ? (JSON.parse(line.slice(5)) as Probe["info"]) : null);
      } catch {
        done(null);
      }
    });
    socket.once("error", () => done(null));
    socket.once("close", () => done(null));
  });
}

/** Upgrades the socket with the configured files; the alert that ends the session right after the handshake, if any. */
function tlsAlert(socket: Socket, host: string, tls: NonNullable<Config["nats"]["tls"]>): Promise<Probe["alert"]> {
  return new Promise((resolve) => {
    const secure = tlsConnect({
      socket,
      ...(isIP(host) ? {} : { servername: host }),
      ...(tls.ca ? { ca: readFileSync(tls.ca) } : {}),
      ...(tls.cert ? { cert: readFileSync(tls.cert) } : {}),
      ...(tls.key ? { key: readFileSync(tls.key) } : {}),
    });
    let settled = false;
    const finish = (value: Probe["alert"]) => {
      if (settled) return;
      settled = true;
      secure.destroy();
      resolve(value);
    };
    secure.once("error", (err: NodeJS.ErrnoException) => finish({ code: err.code ?? "", text: /alert ([a-z ]+)/i.exec(err.message)?.[1] ?? err.message }));
    // TLS 1.3: the server judges the client certificate after the handshake; give its alert a moment to arrive
    secure.once("secureConnect", () => setTimeout(() => finish(null), 1000));
    secure.once("close", () => finish(null));
  });
}

function hostPort(server: string): { host: string; port: number } {
  const url = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(server) ? server : `nats://${server}`);
  return { host: url.hostname.replace(/^\[|\]$/g, ""), port: Number(url.port || 4222) };
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | null> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(null), ms);
    void promise.then((v) => {
      clearTimeout(timer);
      resolve(v);
    }, () => {
      clearTimeout(timer);
      resolve(null);
    });
  });
}
