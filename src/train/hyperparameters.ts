// The seed's fixed hyper-parameters (bt_train.py): LoRA targets and shape, PPO clip and KL weight, gradient
// clipping, weight decay. What a run may vary is its job (src/contract/job.ts).

/** The seed's LoRA targets (bt_train.py MODULES), matched with re.fullmatch against module paths. */
export const LORA_TARGETS =
  "model.language_model.*\\.(q_proj|k_proj|v_proj|o_proj|in_proj_qkv|in_proj_z|in_proj_b|in_proj_a|out_proj" +
  "|gate_proj|up_proj|down_proj)$";
export const LORA_RANK = 16;
export const LORA_ALPHA = 32;
export const PPO_CLIP = 0.2;
export const PPO_BETA = 0.02;
export const MAX_GRAD_NORM = 1.0;
export const WEIGHT_DECAY = 0.01;
