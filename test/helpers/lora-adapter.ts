// Writes a small PEFT-layout LoRA adapter directory (adapter_config.json + a real safetensors file) for the
// reloader and fake-vLLM tests. The tensors are tiny; the format is the real one (8-byte little-endian header
// length, JSON header with dtype/shape/data_offsets, raw little-endian data).
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";

export interface AdapterSpec {
  r: number;
  alpha: number;
  /** omit keys from adapter_config.json (to make an invalid adapter) */
  dropConfigKeys?: string[];
  /** leave adapter_model.safetensors out */
  noWeights?: boolean;
  /** value the tensors are filled with, so two rounds differ */
  fill: number;
}

export const TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"];

export function adapterConfig(spec: AdapterSpec): string {
  const config: Record<string, unknown> = {
    peft_type: "LORA", task_type: "CAUSAL_LM", base_model_name_or_path: "Qwen/Qwen3.5-9B",
    r: spec.r, lora_alpha: spec.alpha, lora_dropout: 0, bias: "none", target_modules: TARGET_MODULES,
  };
  for (const key of spec.dropConfigKeys ?? []) delete config[key];
  return JSON.stringify(config, null, 2);
}

/** safetensors bytes of lora_A [r, 8] and lora_B [8, r] for one q_proj, float32, filled with `fill`. */
export function adapterWeights(spec: AdapterSpec): Buffer {
  const prefix = "base_model.model.model.language_model.layers.0.self_attn.q_proj";
  const count = spec.r * 8;
  const header = {
    [`${prefix}.lora_A.weight`]: { dtype: "F32", shape: [spec.r, 8], data_offsets: [0, count * 4] },
    [`${prefix}.lora_B.weight`]: { dtype: "F32", shape: [8, spec.r], data_offsets: [count * 4, count * 8] },
  };
  let json = JSON.stringify(header);
  json += " ".repeat((8 - (json.length % 8)) % 8); // the format pads the header to 8 bytes with spaces
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  const data = Buffer.alloc(count * 8);
  for (let i = 0; i < count * 2; i++) data.writeFloatLE(spec.fill, i * 4);
  return Buffer.concat([length, Buffer.from(json, "utf8"), data]);
}

export async function writeAdapterDir(dir: string, spec: AdapterSpec): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, "adapter_config.json"), adapterConfig(spec));
  if (!spec.noWeights) await writeFile(join(dir, "adapter_model.safetensors"), adapterWeights(spec));
}
