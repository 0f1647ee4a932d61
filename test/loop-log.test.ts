// Logs: JSON lines with component bindings; credentials never reach them (src/redact.ts: by key at any depth, and by
// value once a config registered them, in any string). The sweep over every command: test/ops-redaction.test.ts.
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
    for (const secret of ["hunter2", "tok-123"]) expect(text).not.toContain(secret);
    const line = JSON.parse(lines[0] as string) as { component: string; policy: string; config: { nats: { user: string; pass: string } } };
    expect(line.component).toBe("daemon");
    expect(line.policy).toBe("bt");
    expect(line.config.nats.user).toBe("u");
    expect(line.config.nats.pass).toBe("[redacted]");
  });

  it("log - redactedConfig hides the password, the token, URL credentials and trainer.env values; trainer.seed stays", () => {
    const config = redactedConfig(parseConfig({ nats: { url: "nats://alice:s3cret-pw@host:4222", pass: "p", token: "t" }, trainer: { seed: 7, env: { HF_TOKEN: "hf_abcdef" } } }));
    expect([config.nats.pass, config.nats.token, config.nats.url]).toEqual(["[redacted]", "[redacted]", "nats://[redacted]@host:4222"]);
    expect(config.trainer.env).toEqual({ HF_TOKEN: "[redacted]" });
    expect(config.trainer.seed).toBe(7);
  });

  it("log - a registered secret is scrubbed from any string, an error message included", () => {
    const lines: string[] = [];
    const sink = new Writable({ write(chunk: Buffer, _enc, done) { lines.push(chunk.toString()); done(); } });
    setRootLogger(createRootLogger("info", sink));
    parseConfig({ trainer: { env: { HF_TOKEN: "hf_zyxwvu" } }, nats: { url: "nats://bob:pa55word@h:1" } });
    logger("x").error({ err: new Error("cannot reach nats://bob:pa55word@h:1 with HF_TOKEN=hf_zyxwvu") }, "failed for hf_zyxwvu");
    const text = lines.join("");
    for (const secret of ["hf_zyxwvu", "pa55word"]) expect(text).not.toContain(secret);
    expect(text).toContain("[redacted]");
  });
});
