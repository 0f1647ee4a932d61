// Which device and how many ranks a run gets (src/train/job-inputs.ts resolveModel): from the flags, else from the GPUs
// the rank processes will see. The daemon passes its trainer.env over its own environment, so a
// CUDA_VISIBLE_DEVICES there (not the daemon's) decides.
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { resolveModel } from "../src/train/job-inputs.js";

describe("train devices - ranks from the GPUs the ranks will see", () => {
  let model: string;
  beforeAll(async () => {
    model = await mkdtemp(join(tmpdir(), "rlloop-devices-"));
    for (const file of ["config.json", "tokenizer.json", "preprocessor_config.json", "model.safetensors"]) await writeFile(join(model, file), "{}");
  });
  const flags = (extra: { gpus?: number; device?: "cpu" | "cuda" } = {}) => ({ model, checkpointing: "auto" as const, ...extra });

  it("CUDA_VISIBLE_DEVICES of the ranks' environment: one rank per listed GPU, bf16 on cuda", async () => {
    expect(await resolveModel(flags(), { CUDA_VISIBLE_DEVICES: "4,5" })).toEqual({
      model: { dir: model, device: "cuda:0", dtype: "bfloat16", checkpointing: "auto", tf32: "auto", attention: "flash" }, ranks: 2,
    });
  });

  it("no GPU visible (empty or -1): one CPU rank in fp32; --gpus and --device override", async () => {
    for (const visible of ["", "-1"]) {
      expect(await resolveModel(flags(), { CUDA_VISIBLE_DEVICES: visible })).toMatchObject({ model: { device: "cpu", dtype: "float32" }, ranks: 1 });
    }
    expect(await resolveModel(flags({ gpus: 2, device: "cpu" }), { CUDA_VISIBLE_DEVICES: "0,1,2,3" })).toMatchObject({ model: { device: "cpu" }, ranks: 2 });
    expect(await resolveModel(flags({ gpus: 3 }), { CUDA_VISIBLE_DEVICES: "0,1,2,3" })).toMatchObject({ model: { device: "cuda:0" }, ranks: 3 });
  });
});
