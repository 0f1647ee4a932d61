// rlloop train ppo vs the fresh Python reference of the seed algorithm (gradients in float64, float32 LoRA weights and
// torch's AdamW as the seed has them), rlloop in fp32 on CPU, tiny Qwen3.5 "a": a full round (2 epochs, batch 2,
// accumulation 2 on 8 rows: 4 updates) from a seed round's adapter and optimizer.pt (imported by rlloop, loaded by
// the reference), then a second round that continues from rlloop's first-round adapter and optimizer state (the
// reference loads that adapter with PEFT and that state into torch's AdamW). Then the first round on 2 Gloo ranks of
// batch 1 against 1 rank of batch 2.
// Tolerances: LoRA updates 1e-3 relative per tensor (L2); AdamW moments 1e-3 relative per tensor; stats.json
// fields 1e-4; ranks 1e-4 relative.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { expectFieldsClose, expectSameMoments, expectSameUpdates, figure, rlloopTrain, reference, scratch, trainFixture } from "./helpers/train-run.js";

const STATS = ["pg_loss", "kl", "clip_frac", "logp_gap", "logp_gap_abs", "rows"];
// 10× the seed's default: at 3e-6 four updates are a few hundred float32 ulps of a LoRA weight, so one rounding
// decision is ~1e-3 of a 64-element tensor's update and no row clips; at 3e-5 the last epoch clips 5 rows in 8
// (both branches of the clipped objective), every ratio ≥ 0.004 from a clip boundary.
const LR = "3e-5";

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

  it("a full round from a seed round (its optimizer.pt imported) equals the reference's: updates, moments, stats.json", async () => {
    const start = join(fx, "seed-round");
    const log = await rlloopTrain(["ppo", ...args(start, join(work, "rl1")), "--seed", "0"], "info");
    await reference("ppo", args(start, join(work, "py1")), 8, 2, 0, work);
    // where the memory goes: nothing recomputed on the CPU (auto), batches of 2 padded rows, no accelerator memory
    const epochs = log.filter((l) => typeof l.msg === "string" && /^ppo epoch \d$/.test(l.msg));
    expect(epochs.map((l) => [l.recomputedLayers, Number(l.maxTokens) > 0 && Number(l.maxTokens) % 2 === 0])).toEqual([[0, true], [0, true]]);
    expect(log.find((l) => l.msg === "ppo start")?.gpuAllocatedGiB).toBe(0);
    figure("ppo round 1: LoRA update vs reference, worst tensor", await expectSameUpdates(start, join(work, "rl1"), join(work, "py1"), 1e-3), 1e-3);
    figure("ppo round 1: AdamW moments vs reference, worst tensor", await expectSameMoments(join(work, "rl1"), join(work, "py1"), 1e-3), 1e-3);
    const [rl, py] = [await stats(join(work, "rl1")), await stats(join(work, "py1"))];
    figure("ppo round 1: stats.json fields vs reference", expectFieldsClose(rl, py, STATS, 1e-4), 1e-4);
    expect(rl.clip_frac).toBeGreaterThan(0);
    expect(rl.clip_frac).toBeLessThan(1);
  });

  it("a second round continues the adapter and its optimizer state as the reference does (PEFT loads the adapter)", async () => {
    await rlloopTrain(["ppo", ...args(join(work, "rl1"), join(work, "rl2")), "--seed", "1"]);
    await reference("ppo", args(join(work, "rl1"), join(work, "py2")), 8, 2, 1, work);
    figure("ppo round 2: LoRA update vs reference, worst tensor", await expectSameUpdates(join(work, "rl1"), join(work, "rl2"), join(work, "py2"), 1e-3), 1e-3);
    figure("ppo round 2: AdamW moments vs reference, worst tensor", await expectSameMoments(join(work, "rl2"), join(work, "py2"), 1e-3), 1e-3);
    figure("ppo round 2: stats.json fields vs reference", expectFieldsClose(await stats(join(work, "rl2")), await stats(join(work, "py2")), STATS, 1e-4), 1e-4);
  });

  it("a loop's first round (the reference is the adapter itself: one frozen pass, no reference loaded) equals the reference", async () => {
    // The reference trainer runs both frozen passes and a separate no-grad pass for every row; rlloop runs one pass
    // and takes the first update's old and reference log-probs from that update's own forwards (first-update.ts).
    const start = join(fx, "seed-round");
    const own = args(start, join(work, "rl-own"));
    own[own.indexOf("--ref") + 1] = start;
    await rlloopTrain(["ppo", ...own, "--seed", "0"]);
    const py = args(start, join(work, "py-own"));
    py[py.indexOf("--ref") + 1] = start;
    await reference("ppo", py, 8, 2, 0, work);
    figure("ppo ref = adapter: LoRA update vs reference, worst tensor", await expectSameUpdates(start, join(work, "rl-own"), join(work, "py-own"), 1e-3), 1e-3);
    figure("ppo ref = adapter: AdamW moments vs reference, worst tensor", await expectSameMoments(join(work, "rl-own"), join(work, "py-own"), 1e-3), 1e-3);
    figure("ppo ref = adapter: stats.json fields vs reference", expectFieldsClose(await stats(join(work, "rl-own")), await stats(join(work, "py-own")), STATS, 1e-4), 1e-4);
  });

  it("2 Gloo ranks of batch 1 equal 1 rank of batch 2 on the same global batches (the first round's run)", async () => {
    const start = join(fx, "seed-round");
    const two = [...args(start, join(work, "rank2")), "--gpus", "2", "--seed", "0"];
    two[two.indexOf("--batch") + 1] = "1";
    await rlloopTrain(["ppo", ...two]);
    figure("ppo 2 ranks vs 1 rank: LoRA update, worst tensor", await expectSameUpdates(start, join(work, "rank2"), join(work, "rl1"), 1e-4), 1e-4);
    figure("ppo 2 ranks vs 1 rank: AdamW moments, worst tensor", await expectSameMoments(join(work, "rank2"), join(work, "rl1"), 1e-4), 1e-4);
    const [s1, s2] = [await stats(join(work, "rl1")), await stats(join(work, "rank2"))];
    figure("ppo 2 ranks vs 1 rank: stats.json fields", expectFieldsClose(s2, s1, STATS, 1e-4), 1e-4);
    expect(s2.rows).toBe(8);
  });
});
