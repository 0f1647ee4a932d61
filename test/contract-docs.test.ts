// The documentation of the wire is checked against the contract: docs/daemon.md's subject table names every subject
// `subjects()` builds and every stream subject, and its "Rejections" section every reject reason; the README's
// "publish your first rollout" worker is the example worker's code.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EVENT_STREAM_SUBJECTS, RejectReason, ROLLOUT_STREAM_SUBJECTS, RoundEvent, ReplicaEvent, subjects } from "../src/contract/index.js";
import { REPO } from "./helpers/loop.js";

const daemonDoc = readFileSync(join(REPO, "docs", "daemon.md"), "utf8");

describe("contract - docs", () => {
  it("docs/daemon.md's subject table has every subject of a policy, every event kind and every stream subject", () => {
    const s = subjects("POLICY");
    const named = [s.rollouts, s.rejected, s.round("<kind>"), s.adapterPublished, s.adapterRolledBack, s.replica("<kind>"), s.stats, s.status, s.roundsQuery, s.rollbackRequest]
      .map((subject) => subject.replace("POLICY", "<policy>"));
    for (const subject of named) expect(daemonDoc, subject).toContain(`| \`${subject}\` |`);
    const kinds = (union: { options: ReadonlyArray<{ shape: { type: { value: string } } }> }, prefix: string) =>
      union.options.map((o) => o.shape.type.value.slice(prefix.length));
    const roundRow = daemonDoc.split("\n").find((l) => l.startsWith("| `rlloop.<policy>.round.<kind>`")) ?? "";
    for (const kind of kinds(RoundEvent as never, "round.")) expect(roundRow, kind).toContain(kind);
    const replicaRow = daemonDoc.split("\n").find((l) => l.startsWith("| `rlloop.<policy>.replica.<kind>`")) ?? "";
    for (const kind of kinds(ReplicaEvent as never, "replica.")) expect(replicaRow, kind).toContain(kind);
    for (const subject of [...ROLLOUT_STREAM_SUBJECTS, ...EVENT_STREAM_SUBJECTS]) expect(daemonDoc, subject).toContain(`\`${subject}\``);
  });

  it("docs/daemon.md names every reject reason", () => {
    const missing = Object.keys(RejectReason).filter((reason) => !daemonDoc.includes(`\`${reason}\``));
    expect(missing).toEqual([]);
  });
});
