// NATS as users secure it: a real nats-server for each method — user/password, token, nkey, a `.creds` file (JWTs
// made at test time), mutual TLS with a CA made at test time (helpers/nats-secured.ts) — and the daemon and every
// operator command (simulate, status, watch, replay, reload) run as child processes against it. No secret appears in
// any log line or output. Wrong credentials and certificates the other side does not trust end the start at once with
// a one-line reason that says what to fix.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { createUser } from "@nats-io/jwt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { subjects, type AdapterPublished } from "../src/contract/index.js";
import { parseConfig, type ConfigInput } from "../src/loop/config/index.js";
import { connectNats } from "../src/loop/connection.js";
import { startFakeVllm } from "./helpers/fake-vllm.js";
import { AUTH_METHODS, makePki, startSecuredServer, type AuthMethod, type Pki, type SecuredServer } from "./helpers/nats-secured.js";
import { REPO, cliArgs, eventsOn, spawnDaemon, startLoopEnv, waitFor } from "./helpers/loop.js";

describe("loop - NATS with credentials and TLS", () => {
  let dir: string;
  let pki: Pki;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "rlloop-auth-"));
    pki = makePki(join(dir, "pki"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  for (const method of AUTH_METHODS) {
    it(`${method}: the daemon, simulate, status, watch, replay and reload connect, and no output carries a secret`, async () => {
      const secured = await startSecuredServer(method, dir, pki);
      const env = await startLoopEnv({ nats: secured, connect: secured.connect });
      const vllm = await startFakeVllm();
      try {
        // debug: the daemon logs its whole (redacted) configuration
        const config = env.writeConfig({ nats: secured.nats, log: { level: "debug" } });
        const outputs: Array<[string, string]> = [];
        const daemon = spawnDaemon(config);
        let daemonErr = "";
        daemon.child.stderr?.on("data", (c: Buffer) => (daemonErr += c.toString()));
        await daemon.waitForLog("daemon started", (l) => l.msg === "daemon started");
        const run = async (...args: string[]) => {
          const r = await execa(process.execPath, cliArgs(...args, "--config", config), { cwd: REPO, reject: false, timeout: 60_000 });
          outputs.push([`${args[0]} stdout`, r.stdout], [`${args[0]} stderr`, r.stderr]);
          expect(r.exitCode, `rlloop ${args.join(" ")}: ${r.stderr}`).toBe(0);
          return r;
        };

        await run("simulate", "--count", "8", "--max-steps", "1", "--width", "64", "--height", "48", "--memory-bits", "2", "--quiet");
        await waitFor("round 1 published", async () => ((await eventsOn<AdapterPublished>(env.jsm, subjects("bt").adapterPublished)).length === 1 ? true : null));
        expect(JSON.parse((await run("status")).stdout)).toMatchObject({ daemon: { round: 1 } });
        expect((await run("watch", "--once")).stdout).toContain("1 committed");
        expect(JSON.parse((await run("replay", "--round", "1")).stdout)).toMatchObject({ round: 1, match: true });
        const reload = execa(process.execPath, cliArgs("reload", "--config", config, "--vllm", vllm.url, "--dir", join(env.dir, "reloaded")), { cwd: REPO, reject: false });
        await waitFor("the replica loaded round 1", async () => ((await eventsOn<{ type: string }>(env.jsm, subjects("bt").replicas)).some((e) => e.type === "replica.loaded") ? true : null));
        reload.kill("SIGTERM");
        const reloaded = await reload;
        outputs.push(["reload stdout", String(reloaded.stdout)], ["reload stderr", String(reloaded.stderr)]);
        daemon.child.kill("SIGTERM");
        expect(await daemon.exited).toBe(0);
        outputs.push(["daemon log", daemon.lines.map((l) => JSON.stringify(l)).join("\n")], ["daemon stderr", daemonErr]);

        expect(daemon.lines.some((l) => l.msg === "configuration")).toBe(true);
        for (const secret of secured.secrets) {
          for (const [what, text] of outputs) expect(text.includes(secret), `${what} carries the ${method} secret`).toBe(false);
        }
      } finally {
        await vllm.close();
        await env.close();
      }
    });
  }

  it("credentials revoked while the daemon runs: the server drops it, refuses it on reconnect, and the daemon stops with the reason (exit 1) instead of looking alive", async () => {
    const secured = await startSecuredServer("user/password", join(dir, "revoked"), pki);
    const env = await startLoopEnv({ nats: secured, connect: secured.connect });
    try {
      const daemon = spawnDaemon(env.writeConfig({ nats: secured.nats, log: { level: "info" } }));
      let stderr = "";
      daemon.child.stderr?.on("data", (c: Buffer) => (stderr += c.toString()));
      await daemon.waitForLog("daemon started", (l) => l.msg === "daemon started").catch((err: Error) => {
        throw new Error(`${err.message}: ${stderr}\n${daemon.lines.map((l) => JSON.stringify(l)).join("\n")}`);
      });
      // a new password, and the server told to reload its config (SIGHUP): it closes the clients it no longer admits
      const conf = join(dir, "revoked", "user-password", "server.conf");
      writeFileSync(conf, readFileSync(conf, "utf8").replace(secured.secrets[0] as string, "pw-rotated-elsewhere"));
      secured.server.child.kill("SIGHUP");
      expect(await daemon.exited).toBe(1);
      const fatal = daemon.lines.find((l) => l.msg === "NATS connection lost for good");
      expect(JSON.stringify(fatal)).toMatch(/the NATS connection closed and will not reconnect: .*Authorization Violation/i);
      expect(daemon.lines.some((l) => l.msg === "stopped")).toBe(true);
      for (const line of daemon.lines) expect(JSON.stringify(line)).not.toContain(secured.secrets[0]);
    } finally {
      await env.close();
    }
  });

  it("wrong credentials, untrusted certificates and misplaced credentials end the start with a one-line reason that names the fix", async () => {
    const servers = new Map<AuthMethod, SecuredServer>();
    for (const method of AUTH_METHODS) servers.set(method, await startSecuredServer(method, join(dir, "refusals"), pki));
    const at = (method: AuthMethod) => servers.get(method) as SecuredServer;
    const port = (method: AuthMethod) => new URL(at(method).url).port;
    const pass = at("user/password").secrets[0] as string;
    try {
      // each refused the way the daemon's first connection is (connection.ts); the daemon itself below
      const cases: Array<[string, NonNullable<ConfigInput["nats"]>, RegExp, string | null]> = [
        ["a wrong password", { url: at("user/password").url, user: "alice", pass: "not-the-password" }, /refused the connection's credentials, user\/password of user "alice" \(nats\.user, nats\.pass\): Authorization Violation/, "not-the-password"],
        ["no credentials", { url: at("token").url }, /refused the connection's credentials, no credentials \(a server that wants them needs nats\.user\/nats\.pass, nats\.token/, null],
        ["a wrong token", { url: at("token").url, token: "wrong-token-0123" }, /refused the connection's credentials, token \(nats\.token\)/, "wrong-token-0123"],
        ["an nkey the server does not know", { url: at("nkey").url, nkeySeed: new TextDecoder().decode(createUser().getSeed()) }, /refused the connection's credentials, nkey \(nats\.nkeySeed\)/, null],
        ["a malformed nkey seed", { url: at("nkey").url, nkeySeed: "SUNOTASEED" }, /'nats\.nkeySeed' must be a user nkey seed/, "SUNOTASEED"],
        ["a password in nats.url", { url: `nats://alice:wrong%40pw@127.0.0.1:${port("user/password")}` }, /refused the connection's credentials, user\/password written in nats\.url \(better: nats\.user and nats\.pass/, "wrong@pw"],
        ["credentials given twice", { url: `nats://alice:${pass}@127.0.0.1:${port("user/password")}`, user: "alice", pass }, /NATS credentials are given 2 ways \(nats\.user\/nats\.pass, credentials in nats\.url\): set exactly one/, pass],
        ["a server certificate from an unknown CA", { url: at("mutual TLS").url, tls: { ca: pki.otherCa, cert: pki.clientCert, key: pki.clientKey } }, /the TLS certificate of NATS at .* is not trusted .*: nats\.tls\.ca must name the CA that signed it/, null],
        ["no client certificate", { url: at("mutual TLS").url, tls: { ca: pki.ca, cert: null, key: null } }, /requires a client certificate \(TLS verify; alert: certificate required\): set nats\.tls\.cert and nats\.tls\.key/, null],
        ["a client certificate the server does not trust", { url: at("mutual TLS").url, tls: { ca: pki.ca, cert: pki.strangerCert, key: pki.strangerKey } }, /did not accept the client certificate .*stranger\.pem \(TLS alert: unknown ca\): it must be signed by a CA the server trusts/, null],
        ["TLS at a server without it", { url: at("token").url, token: at("token").secrets[0] as string, tls: { ca: pki.ca, cert: null, key: null } }, /offers no TLS, but nats\.tls is set/, null],
      ];
      for (const [what, nats, reason, secret] of cases) {
        const started = Date.now();
        const err = await connectNats(parseConfig({ nats }).nats, nats.url as string).then(() => null, (e: Error) => e);
        expect(err?.message, what).toMatch(reason);
        expect(err?.message.split("\n")).toHaveLength(1);
        if (secret) expect(err?.message, what).not.toContain(secret);
        expect(Date.now() - started, what).toBeLessThan(10_000);
      }
      // credentials in nats.url are used as if they were in nats.user/nats.pass
      const inUrl = await connectNats(parseConfig({}).nats, `nats://alice:${encodeURIComponent(pass)}@127.0.0.1:${port("user/password")}`);
      await inUrl.nc.close();

      // the daemon: exit code, the reason as stderr's first line, no secret anywhere
      const env = await startLoopEnv({ nats: { url: at("user/password").url, stop: async () => {} }, connect: at("user/password").connect });
      try {
        for (const [what, nats, reason] of [
          ["wrong password", { user: "alice", pass: "wrong-password-7" }, /^rlloop: .*refused the connection's credentials, user\/password/],
          ["untrusted server certificate", { url: at("mutual TLS").url, tls: { ca: pki.otherCa, cert: pki.clientCert, key: pki.clientKey } }, /^rlloop: .*the TLS certificate of NATS at .* is not trusted/],
          ["client certificate refused", { url: at("mutual TLS").url, tls: { ca: pki.ca, cert: pki.strangerCert, key: pki.strangerKey } }, /^rlloop: .*did not accept the client certificate/],
        ] as const) {
          const started = Date.now();
          const r = await execa(process.execPath, cliArgs("daemon", "--config", env.writeConfig({ nats: { url: at("user/password").url, ...nats }, log: { level: "debug" } })), { cwd: REPO, reject: false, timeout: 60_000 });
          expect(r.exitCode, what).not.toBe(0);
          expect(r.stderr.split("\n")[0], what).toMatch(reason);
          expect(`${r.stdout}${r.stderr}`, what).not.toContain("wrong-password-7");
          console.info(`figure: daemon start with ${what}: exit ${r.exitCode} after ${((Date.now() - started) / 1000).toFixed(1)} s`);
        }
      } finally {
        await env.close();
      }
    } finally {
      for (const s of servers.values()) await s.stop();
    }
  });
});
