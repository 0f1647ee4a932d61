// The PPO optimizer's state across rounds. A round continues the state saved beside its starting adapter:
// optimizer.safetensors (rlloop's, native format) or, from a seed run, optimizer.pt (torch.save of AdamW's
// state_dict), which is converted once by scripts/import_seed_optimizer.py. The LR is always the run's --lr.
import { access } from "node:fs/promises";
import { join } from "node:path";
import { Optimizer, type Model, type ProcessGroup } from "../native.js";
import { WEIGHT_DECAY } from "./hyperparameters.js";
import { importSeedOptimizer } from "./seed-optimizer.js";

export const OPTIMIZER_FILE = "optimizer.safetensors";
export const SEED_OPTIMIZER_FILE = "optimizer.pt";

/** torch.optim.AdamW with the seed's settings (torch defaults, weight decay 0.01), over the adapter's tensors. */
export function createOptimizer(model: Model, adapter: string, lr: number, group: ProcessGroup | null): Optimizer {
  return new Optimizer(model, adapter, {
    lr,
    betas: [0.9, 0.999],
    eps: 1e-8,
    weightDecay: WEIGHT_DECAY,
    ...(group === null ? {} : { group }),
  });
}

export type RestoredFrom = "rlloop" | "seed" | "none";

/** Loads the optimizer state found beside `adapterDir`, if any; says which kind it was. */
export async function restoreOptimizer(
  optimizer: Optimizer,
  adapterDir: string,
  modelDir: string,
): Promise<RestoredFrom> {
  const ours = join(adapterDir, OPTIMIZER_FILE);
  if (await exists(ours)) {
    await optimizer.load(ours);
    return "rlloop";
  }
  const seed = join(adapterDir, SEED_OPTIMIZER_FILE);
  if (await exists(seed)) {
    await optimizer.load(await importSeedOptimizer(seed, adapterDir, modelDir));
    return "seed";
  }
  return "none";
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}
