// rlloop train ppo vs the fresh Python reference of the seed algorithm, fp32 on CPU, tiny Qwen3.5 "a": a full round
// (2 epochs, batch 2, accumulation 2 on 8 rows: 4 updates), then a second round that continues from rlloop's
// first-round adapter and optimizer state (the reference loads that adapter with PEFT and that state into torch's
// AdamW). Then the same round on 2 Gloo ranks of batch 1 against 1 rank of batch 2.
// Tolerances: LoRA updates 1e-3 relative per tensor (L2); stats.json fields 1e-4; ranks 1e-4 relative.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { expectFieldsClose, expectSameUpdates, rlloopTrain, reference, scratch, trainFixture } from "./helpers/train-run.js";

const STATS = ["pg_loss", "kl", "clip_frac", "logp_gap", "logp_gap_abs", "rows"];
const LR = "3e-6"; // the seed default; on this fixture the last epoch clips 1 row in 8 (both branches exercised)

describe("train ppo - against the Python reference", () => {
  let fx: string;
  let work: string;
  const args = (adapter: string, out: string) => [
    "--model", join(fx, "model"), "--data", join(fx, "ppo.jsonl"), "--adapter", adapter, "--ref", join(fx, "ref"),
    "--prompt", join(fx, "prompt.jinja"), "--batch", "2", "--accumulation", "2", "--lr", LR, "--out", out,
  ];
  const stats = async (dir: string) => JSON.parse(await readFile(join(dir, "stats.json"), "utf8"));

  beforeAll(async () => {
    fx = await trainFixture();
    work = await scratch();
  });

  it("a full round equals the reference's (adapter updates and stats.json)", async () => {
    await rlloopTrain(["ppo", ...args(join(fx, "adapter"), join(work, "rl1")), "--seed", "0"]);
    await reference("ppo", args(join(fx, "adapter"), join(work, "py1")), 8, 2, 0, work);
    await expectSameUpdates(join(fx, "adapter"), join(work, "rl1"), join(work, "py1"), 1e-3);
    expectFieldsClose(await stats(join(work, "rl1")), await stats(join(work, "py1")), STATS, 1e-4);
  });

  it("a second round continues the adapter and its optimizer state as the reference does (PEFT loads the adapter)", async () => {
    await rlloopTrain(["ppo", ...args(join(work, "rl1"), join(work, "rl2")), "--seed", "1"]);
    await reference("ppo", args(join(work, "rl1"), join(work, "py2")), 8, 2, 1, work);
    await expectSameUpdates(join(work, "rl1"), join(work, "rl2"), join(work, "py2"), 1e-3);
    expectFieldsClose(await stats(join(work, "rl2")), await stats(join(work, "py2")), STATS, 1e-4);
  });

  it("2 Gloo ranks of batch 1 equal 1 rank of batch 2 on the same global batches", async () => {
    const one = [...args(join(fx, "adapter"), join(work, "rank1")), "--gpus", "1"];
    const two = [...args(join(fx, "adapter"), join(work, "rank2")), "--gpus", "2"];
    two[two.indexOf("--batch") + 1] = "1";
    await rlloopTrain(["ppo", ...one]);
    await rlloopTrain(["ppo", ...two]);
    await expectSameUpdates(join(fx, "adapter"), join(work, "rank2"), join(work, "rank1"), 1e-4);
    const [s1, s2] = [await stats(join(work, "rank1")), await stats(join(work, "rank2"))];
    expectFieldsClose(s2, s1, STATS, 1e-4);
    expect(s2.rows).toBe(8);
  });
});
