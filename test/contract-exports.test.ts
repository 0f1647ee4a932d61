// The package's entry point for TypeScript rollout workers and monitors (`exports` in package.json): a consumer
// project that depends on rlloop imports the contract and the typed publisher from "rlloop/contract" — its types
// check under strict NodeNext resolution, and at run time the publisher refuses an invalid rollout (naming the
// field) and publishes a valid one with its message id on a real nats-server.
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../src/loop/config/index.js";
import { ensureStreams } from "../src/loop/connection.js";
import { REPO, makeRollout } from "./helpers/loop.js";
import { startNatsServer, type NatsServer } from "./helpers/nats.js";

describe("contract - the package entry point", () => {
  let server: NatsServer;
  let project: string;

  beforeAll(async () => {
    server = await startNatsServer();
    project = mkdtempSync(join(tmpdir(), "rlloop-consumer-"));
    mkdirSync(join(project, "node_modules", "@nats-io"), { recursive: true });
    mkdirSync(join(project, "node_modules", "@types"), { recursive: true });
    symlinkSync(join(REPO, "node_modules", "@types", "node"), join(project, "node_modules", "@types", "node"));
    symlinkSync(REPO, join(project, "node_modules", "rlloop"));
    for (const pkg of ["jetstream", "nats-core", "transport-node"]) symlinkSync(join(REPO, "node_modules", "@nats-io", pkg), join(project, "node_modules", "@nats-io", pkg));
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "worker", type: "module", private: true }));
    writeFileSync(join(project, "tsconfig.json"), JSON.stringify({
      compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true, noEmit: true, skipLibCheck: true, types: ["node"] },
      include: ["worker.ts"],
    }));
    writeFileSync(join(project, "worker.ts"), [
      'import { jetstream } from "@nats-io/jetstream";',
      'import { connect } from "@nats-io/transport-node";',
      'import { InvalidRolloutError, publishRollout, RolloutCompleted, subjects, type RolloutCompletedInput } from "rlloop/contract";',
      "const rollout: RolloutCompletedInput = JSON.parse(process.argv[3] ?? \"{}\");",
      "const nc = await connect({ servers: process.argv[2] });",
      "const js = jetstream(nc);",
      "const bad = { ...rollout, id: `${rollout.id}-bad`, reward: Number.NaN };",
      "const refused = await publishRollout(js, bad).then(() => null, (err: unknown) => (err instanceof InvalidRolloutError ? err.message : String(err)));",
      "const ack = await publishRollout(js, rollout);",
      "const again = await publishRollout(js, rollout);",
      "console.log(JSON.stringify({ refused, seq: ack.seq, duplicate: again.duplicate, subject: subjects(rollout.policy).rollouts, valid: RolloutCompleted.safeParse(rollout).success }));",
      "await nc.drain();",
    ].join("\n"));
  });

  afterAll(async () => {
    await server?.stop();
  });

  it("types check against the published declarations (dist/contract/*.d.ts)", async () => {
    const run = await execa(process.execPath, [join(REPO, "node_modules", "typescript", "bin", "tsc"), "-p", project], { cwd: project, reject: false });
    expect(run.stdout + run.stderr).toBe("");
    expect(run.exitCode).toBe(0);
  });

  it("refuses an invalid rollout by field, publishes a valid one once with its message id", async () => {
    const nc = await connect({ servers: server.url });
    await ensureStreams(await jetstreamManager(nc), parseConfig({}).stream);
    await nc.close();
    const rollout = await makeRollout("ts-worker", 0, { steps: 1 });
    const tsx = pathToFileURL(join(REPO, "node_modules", "tsx", "dist", "loader.mjs")).href;
    const run = await execa(process.execPath, ["--import", tsx, join(project, "worker.ts"), server.url, JSON.stringify(rollout)], { cwd: project });
    const out = JSON.parse(run.stdout) as { refused: string; seq: number; duplicate: boolean; subject: string; valid: boolean };
    expect(out.refused).toBe(`rollout "ts-worker-0-bad": 'reward' must be a finite number`);
    expect(out).toMatchObject({ seq: 1, duplicate: true, subject: "rlloop.bt.rollouts", valid: true });
  });
});
