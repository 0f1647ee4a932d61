// Configuration: defaults, environment overrides, errors that name the field, the rule and the value; every field
// of config/default.json is documented in config/README.md.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigSchema, DEFAULT_CONFIG_FILE, configHash, envTable, loadConfig, parseConfig } from "../src/loop/config.js";
import { ConfigError } from "../src/loop/errors.js";

describe("config - defaults and files", () => {
  it("config/default.json lists exactly the schema's defaults", () => {
    expect(JSON.parse(readFileSync(DEFAULT_CONFIG_FILE, "utf8"))).toEqual(ConfigSchema.parse({}));
  });

  it("config/README.md documents every field", () => {
    const doc = readFileSync(join(DEFAULT_CONFIG_FILE, "..", "README.md"), "utf8");
    const missing = envTable().map((r) => r.path.join(".")).filter((path) => !doc.includes(`\`${path}\``));
    expect(missing).toEqual([]);
  });

  it("resolves relative paths against the working directory", () => {
    const config = parseConfig({ workDir: "runs", frames: { roots: ["frames"] } });
    expect(config.workDir).toBe(join(process.cwd(), "runs"));
    expect(config.frames.roots).toEqual([join(process.cwd(), "frames")]);
  });
});

describe("config - environment overrides", () => {
  it("maps RLLOOP_<SECTION>_<FIELD> onto the config, JSON values parsed", () => {
    const config = loadConfig({ env: {
      RLLOOP_NATS_URL: "nats://10.0.0.1:4222", RLLOOP_ROUND_ROWS: "64", RLLOOP_ROUND_MAX_WAIT_S: "null",
      RLLOOP_FRAMES_ROOTS: "/a,/b", RLLOOP_GATE_MAX_KL: "0.5", RLLOOP_POLICY_NAME: "arm", RLLOOP_PYTHON: "/ignored",
    } });
    expect(config.nats.url).toBe("nats://10.0.0.1:4222");
    expect(config.round.rows).toBe(64);
    expect(config.round.maxWaitS).toBeNull();
    expect(config.frames.roots).toEqual(["/a", "/b"]);
    expect(config.gate.maxKl).toBe(0.5);
    expect(config.policy.name).toBe("arm");
  });

  it("fails on a bad override by field", () => {
    expect(() => loadConfig({ env: { RLLOOP_ROUND_ROWS: "0" } })).toThrow("'round.rows' must be a positive integer, got 0");
  });
});

describe("config - errors name the field, the rule and the value", () => {
  const cases: Array<[string, unknown, string]> = [
    ["zero rows", { round: { rows: 0 } }, "'round.rows' must be a positive integer, got 0"],
    ["string port", { observe: { metricsPort: "x" } }, "'observe.metricsPort'"],
    ["bad policy", { policy: { name: "a.b" } }, "'policy.name' must match"],
    ["unknown key", { round: { size: 3, foo: 1 } }, "'round.size' was renamed to 'round.rows'"],
    ["unknown section", { nope: {} }, "config has unknown key(s) 'nope'"],
    ["unknown nested", { gate: { maxLoss: 1 } }, "'gate' has unknown key(s) 'maxLoss'"],
    ["groups without size", { round: { groups: 4 } }, "'round.groups' needs 'round.groupSize'"],
    ["estimator", { advantage: { estimator: "gae" } }, "'advantage.estimator'"],
  ];
  for (const [name, input, message] of cases) {
    it(`config - ${name}`, () => {
      expect(() => parseConfig(input)).toThrow(ConfigError);
      expect(() => parseConfig(input)).toThrow(message);
    });
  }
});

describe("config - hash", () => {
  it("ignores credentials and key order, follows the rest", () => {
    const a = parseConfig({ nats: { pass: "secret" }, round: { rows: 10, minRows: 2 } });
    const b = parseConfig({ round: { minRows: 2, rows: 10 }, nats: { pass: "other" } });
    const c = parseConfig({ round: { rows: 11, minRows: 2 } });
    expect(configHash(a)).toBe(configHash(b));
    expect(configHash(a)).not.toBe(configHash(c));
  });
});
