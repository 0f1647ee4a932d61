// Logs: JSON lines with component bindings; credentials never reach them (redaction by path, any depth up to 3).
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createRootLogger, logger, setRootLogger } from "../src/log.js";
import { parseConfig, redactedConfig } from "../src/loop/config/index.js";

describe("log - credentials are redacted", () => {
  it("log - a logged config or connection option carries no secret", () => {
    const lines: string[] = [];
    const sink = new Writable({ write(chunk: Buffer, _enc, done) { lines.push(chunk.toString()); done(); } });
    setRootLogger(createRootLogger("info", sink));
    const config = parseConfig({ nats: { user: "u", pass: "hunter2", token: "tok-123", credsFile: "/secret/x.creds", tls: { ca: null, cert: null, key: "/secret/key.pem" } } });
    logger("daemon", { policy: "bt" }).info({ config, options: { pass: "hunter2", token: "tok-123" } }, "starting");
    const text = lines.join("");
    for (const secret of ["hunter2", "tok-123", "/secret/x.creds", "/secret/key.pem"]) expect(text).not.toContain(secret);
    const line = JSON.parse(lines[0] as string) as { component: string; policy: string; config: { nats: { user: string; pass: string } } };
    expect(line.component).toBe("daemon");
    expect(line.policy).toBe("bt");
    expect(line.config.nats.user).toBe("u");
    expect(line.config.nats.pass).toBe("[redacted]");
  });

  it("log - redactedConfig hides the password and token for INFO answers", () => {
    const config = redactedConfig(parseConfig({ nats: { pass: "p", token: "t" } }));
    expect([config.nats.pass, config.nats.token]).toEqual(["[redacted]", "[redacted]"]);
  });
});
