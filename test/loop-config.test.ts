// Configuration: defaults, environment overrides, errors that name the field, the rule and the value; every field
// of config/default.json is documented in config/README.md (both generated: test/contract-schemas.test.ts).
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigSchema, DEFAULT_CONFIG_FILE, configHash, envTable, loadConfig, parseConfig } from "../src/loop/config/index.js";
import { ConfigError } from "../src/loop/errors.js";

describe("config - defaults and files", () => {
  it("config/default.json lists exactly the schema's defaults (and names its JSON Schema)", () => {
    const { $schema, ...defaults } = JSON.parse(readFileSync(DEFAULT_CONFIG_FILE, "utf8")) as Record<string, unknown>;
    expect($schema).toBe("../schema/config.schema.json");
    expect(defaults).toEqual(ConfigSchema.parse({}));
  });

  it("a training run is limited by default (a rank hung on its GPU must not hold the stream for ever)", () => {
    expect(parseConfig({}).trainer.timeoutS).toBe(3600);
    expect(parseConfig({ trainer: { timeoutS: null } }).trainer.timeoutS).toBeNull();
  });

  it("refuses a file that holds no JSON object (an array is not silently the defaults)", () => {
    const file = join(mkdtempSync(join(tmpdir(), "rlloop-config-")), "config.json");
    writeFileSync(file, "[1, 2]");
    expect(() => loadConfig({ file })).toThrow(`config file ${file} must hold a JSON object, got an array`);
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
    ["trainer typo", { trainer: { lrr: 1e-5 } }, "'trainer' has unknown key(s) 'lrr'"],
    ["trainer type", { trainer: { batch: "16" } }, "'trainer.batch'"],
    ["trainer.args", { trainer: { args: ["--model", "/m", "--lr", "1e-5", "--mismatch-stats", "--foo"] } },
      `'trainer.args' was replaced by typed trainer fields: write "trainer": {"model":"/m","lr":0.00001,"mismatchStats":true} instead of "args": ["--model","/m","--lr","1e-5","--mismatch-stats","--foo"]; not a trainer field: --foo`],
    ["trainer.maxAttempts", { trainer: { maxAttempts: 3 } }, "'trainer.maxAttempts' was removed"],
    ["extraArgs without command", { trainer: { extraArgs: ["--x"] } }, "'trainer.extraArgs' is only for a custom 'trainer.command'"],
    ["reward bounds", { limits: { reward: { min: 1, max: 0 } } }, "'limits.reward' must have min <= max"],
    // JetStream error 10052 at start otherwise, far from the setting
    ["duplicate window past the age limit", { stream: { maxAgeS: 30 } }, "'stream.duplicateWindowS' (600) must not exceed 'stream.maxAgeS' (30): the server refuses a longer duplicate window"],
    ["events duplicate window past their age limit", { stream: { eventsMaxAgeS: 3600 } }, "'stream.eventsDuplicateWindowS' (86400) must not exceed 'stream.eventsMaxAgeS' (3600)"],
    ["huge reward bound", { limits: { reward: { min: -1e300, max: 1 } } }, "'limits.reward.min'"],
    // an rloo advantage of 2e38 is Infinity in the trainer's float32: one rollout would make its round non-finite
    ["reward bound beyond float32's reach", { limits: { reward: { min: -1, max: 1e20 } } }, "'limits.reward.max'"],
    ["seed beyond exact round seeds", { trainer: { seed: 2 ** 53 } }, "'trainer.seed'"],
    // a timer fires at once past 2^31 - 1 ms: "no limit" written as a huge number would end every job at once
    ["timeout beyond a timer's range", { trainer: { timeoutS: 1e9 } }, "'trainer.timeoutS' must be at most 2147483 s (~24.8 days, a timer's range); null for no limit, got 1000000000"],
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
