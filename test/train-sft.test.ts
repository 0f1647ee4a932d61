// rlloop train sft vs the fresh Python reference of the seed algorithm (scripts/reference/seed_reference.py:
// transformers + PEFT, gradients in float64, float32 LoRA weights and torch's AdamW as the seed has them), rlloop in
// fp32 on CPU, the tiny Qwen3.5 "a" with the tiny tokenizer, the same starting adapter, rows and row order.
// Tolerances: every LoRA tensor's update within 1e-3 relative (L2, in AdamW's metric: a fresh AdamW's first step
// is ≈ lr·sign(g) per element, see expectSameFirstStep); valid.json fields within 1e-4.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { expectFieldsClose, expectSameFirstStep, figure, rlloopTrain, reference, scratch, trainFixture } from "./helpers/train-run.js";

describe("train sft - against the Python reference", () => {
  let fx: string;
  let work: string;
  beforeAll(async () => {
    fx = await trainFixture();
    work = await scratch();
  });

  it("one SFT update (batch of all 8 rows) gives the reference's LoRA update and valid.json", async () => {
    const common = ["--model", join(fx, "model"), "--data", join(fx, "sft.jsonl"), "--valid", join(fx, "valid.jsonl"), "--adapter", join(fx, "adapter"), "--prompt", join(fx, "prompt.jinja"), "--batch", "8", "--max-updates", "1", "--lr", "1e-3"];
    await rlloopTrain(["sft", ...common, "--out", join(work, "rl"), "--seed", "0"]);
    await reference("sft", [...common, "--out", join(work, "py")], 8, 1, 0, work);
    const { worst, worstPlain } = await expectSameFirstStep(join(fx, "adapter"), join(work, "rl"), join(work, "py"), 1e-3);
    figure("sft: LoRA update vs reference, worst tensor (AdamW-weighted)", worst, 1e-3);
    figure("sft: LoRA update vs reference, worst tensor (plain L2, not asserted)", worstPlain, 1e-3);
    const rl = JSON.parse(await readFile(join(work, "rl", "valid.json"), "utf8"));
    const py = JSON.parse(await readFile(join(work, "py", "valid.json"), "utf8"));
    expect(rl.updates).toBe(1);
    figure("sft: valid.json fields vs reference", expectFieldsClose(rl, py, ["epoch", "updates", "digit_acc", "code_acc", "rows"], 1e-4), 1e-4);
  });
});
