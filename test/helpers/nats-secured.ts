// Credentials and certificates made at test time, and nats-servers configured to demand them: user/password, a token,
// an nkey, a `.creds` file (operator → account → user JWTs signed with nkeys, @nats-io/jwt), mutual TLS (a CA,
// server and client certificates from openssl). Each `SecuredServer` says how the env's own connection and the
// daemon's config reach it, and which strings are secrets (none may appear in any output).
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createAccount, createOperator, createUser, encodeAccount, encodeOperator, encodeUser, fmtCreds } from "@nats-io/jwt";
import { credsAuthenticator, nkeyAuthenticator } from "@nats-io/nats-core";
import type { NodeConnectionOptions } from "@nats-io/transport-node";
import type { ConfigInput } from "../../src/loop/config/index.js";
import { launchServer, type LaunchedServer } from "./nats-configured.js";

export type AuthMethod = "user/password" | "token" | "nkey" | "creds" | "mutual TLS";
export const AUTH_METHODS: AuthMethod[] = ["user/password", "token", "nkey", "creds", "mutual TLS"];

export interface SecuredServer {
  method: AuthMethod;
  url: string;
  /** the env's own connection */
  connect: Partial<NodeConnectionOptions>;
  /** the daemon's and the commands' `nats` config */
  nats: NonNullable<ConfigInput["nats"]>;
  secrets: string[];
  server: LaunchedServer;
  stop(): Promise<void>;
}

export interface Pki {
  ca: string;
  /** a CA the server does not know */
  otherCa: string;
  clientCert: string;
  clientKey: string;
  /** a client certificate signed by the other CA */
  strangerCert: string;
  strangerKey: string;
  serverCert: string;
  serverKey: string;
}

/** A CA, a server certificate for 127.0.0.1/localhost and client certificates, written under `dir` by openssl. */
export function makePki(dir: string): Pki {
  mkdirSync(dir, { recursive: true });
  const at = (name: string) => join(dir, name);
  const ssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  for (const ca of ["ca", "other-ca"]) ssl("req", "-x509", ...ec, "-keyout", at(`${ca}.key`), "-out", at(`${ca}.pem`), "-days", "2", "-subj", `/CN=rlloop test ${ca}`);
  const issue = (name: string, ca: string, ext: string, cn: string) => {
    writeFileSync(at(`${name}.ext`), ext);
    ssl("req", ...ec, "-keyout", at(`${name}.key`), "-out", at(`${name}.csr`), "-subj", `/CN=${cn}`);
    ssl("x509", "-req", "-in", at(`${name}.csr`), "-CA", at(`${ca}.pem`), "-CAkey", at(`${ca}.key`), "-CAcreateserial", "-out", at(`${name}.pem`), "-days", "2", "-extfile", at(`${name}.ext`));
  };
  issue("server", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n", "127.0.0.1");
  issue("client", "ca", "extendedKeyUsage=clientAuth\n", "rlloop");
  issue("stranger", "other-ca", "extendedKeyUsage=clientAuth\n", "stranger");
  return {
    ca: at("ca.pem"), otherCa: at("other-ca.pem"), serverCert: at("server.pem"), serverKey: at("server.key"),
    clientCert: at("client.pem"), clientKey: at("client.key"), strangerCert: at("stranger.pem"), strangerKey: at("stranger.key"),
  };
}

const BASE = (dir: string) => `listen: 127.0.0.1:-1\nhttp: 127.0.0.1:-1\njetstream { store_dir: ${JSON.stringify(join(dir, "store"))} }\n`;
const randomSecret = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;

/** A nats-server that accepts only `method` (each in a folder of its own under `dir`). */
export async function startSecuredServer(method: AuthMethod, dir: string, pki: Pki): Promise<SecuredServer> {
  const home = join(dir, method.replace(/[^a-z]/g, "-"));
  mkdirSync(home, { recursive: true });
  let conf = BASE(home);
  let connect: Partial<NodeConnectionOptions> = {};
  let nats: SecuredServer["nats"] = {};
  let secrets: string[] = [];
  if (method === "user/password") {
    const pass = randomSecret("pw");
    conf += `authorization { users: [ { user: alice, password: ${JSON.stringify(pass)} } ] }\n`;
    connect = { user: "alice", pass };
    nats = { user: "alice", pass };
    secrets = [pass];
  } else if (method === "token") {
    const token = randomSecret("tok");
    conf += `authorization { token: ${JSON.stringify(token)} }\n`;
    connect = { token };
    nats = { token };
    secrets = [token];
  } else if (method === "nkey") {
    const user = createUser();
    const seed = new TextDecoder().decode(user.getSeed());
    conf += `authorization { users: [ { nkey: ${user.getPublicKey()} } ] }\n`;
    connect = { authenticator: nkeyAuthenticator(user.getSeed()) };
    nats = { nkeySeed: seed };
    secrets = [seed];
  } else if (method === "creds") {
    const operator = createOperator();
    const system = createAccount();
    const account = createAccount();
    const user = createUser();
    const operatorJwt = await encodeOperator("rlloop-test", operator, { system_account: system.getPublicKey() });
    const systemJwt = await encodeAccount("SYS", system, {}, { signer: operator });
    const accountJwt = await encodeAccount("RLLOOP", account, {
      // every limit stated: one left out counts as 0 (no connection allowed)
      limits: { conn: -1, subs: -1, data: -1, payload: -1, imports: -1, exports: -1, leaf: -1, wildcards: true, mem_storage: -1, disk_storage: -1, streams: -1, consumer: -1 },
    }, { signer: operator });
    const userJwt = await encodeUser("rlloop", user, account);
    const credsFile = join(home, "rlloop.creds");
    const creds = fmtCreds(userJwt, user);
    writeFileSync(credsFile, creds);
    conf += `operator: ${JSON.stringify(operatorJwt)}\nsystem_account: ${system.getPublicKey()}\nresolver: MEMORY\n`;
    conf += `resolver_preload: { ${system.getPublicKey()}: ${JSON.stringify(systemJwt)}, ${account.getPublicKey()}: ${JSON.stringify(accountJwt)} }\n`;
    connect = { authenticator: credsAuthenticator(creds) };
    nats = { credsFile };
    secrets = [userJwt, new TextDecoder().decode(user.getSeed())];
  } else {
    conf += `tls { cert_file: ${JSON.stringify(pki.serverCert)}, key_file: ${JSON.stringify(pki.serverKey)}, ca_file: ${JSON.stringify(pki.ca)}, verify: true }\n`;
    connect = { tls: { caFile: pki.ca, certFile: pki.clientCert, keyFile: pki.clientKey } };
    nats = { tls: { ca: pki.ca, cert: pki.clientCert, key: pki.clientKey } };
    // the key's body: one line of the PEM is enough to recognise it
    secrets = [readFileSync(pki.clientKey, "utf8").split("\n")[1] as string];
  }
  const server = await launchServer(home, conf);
  const url = `nats://127.0.0.1:${server.ports.client}`;
  return { method, url, connect, nats: { url, ...nats }, secrets, server, stop: () => server.kill() };
}
