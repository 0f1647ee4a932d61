"""Benchmark data for the PPO/SFT trainers at the issue's sizes: 640x480 frames, rows in the seed's format
(image, name, code of 6 digits, memory on half of the rows; PPO rows add adv and vllm_logp), and a starting LoRA
adapter in PEFT layout (r 16, alpha 32, the seed's twelve modules) with non-zero A and B, written straight from
the checkpoint's config (no model load needed).
Usage: python3 make_ppo_data.py MODEL_DIR OUT_DIR [--rows 256] [--valid 32] [--seed 0]
"""
import argparse
import json
import math
import random
from pathlib import Path

import torch
from safetensors.torch import save_file

from make_rows import frame

MODULES = (r"model.language_model.*\.(q_proj|k_proj|v_proj|o_proj|in_proj_qkv|in_proj_z|in_proj_b|in_proj_a|out_proj"
           r"|gate_proj|up_proj|down_proj)$")
NAMES = ["red cup", "blue ball", "door", "green chair", "yellow box", "plant", "person", "bottle", "drawer", "sink"]


def lora_shapes(text: dict) -> dict:
    """{module path: (out, in)} of every LoRA target of the language model (qwen35.md §13)."""
    h, inter = text["hidden_size"], text["intermediate_size"]
    hd, nh, kv = text["head_dim"], text["num_attention_heads"], text["num_key_value_heads"]
    kd = text["linear_num_key_heads"] * text["linear_key_head_dim"]
    vd = text["linear_num_value_heads"] * text["linear_value_head_dim"]
    hv = text["linear_num_value_heads"]
    n = text["num_hidden_layers"]
    interval = text.get("full_attention_interval", 4)
    types = text.get("layer_types") or ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n)]
    out = {}
    for i, kind in enumerate(types):
        p = f"model.language_model.layers.{i}"
        if kind == "full_attention":
            out.update({f"{p}.self_attn.q_proj": (2 * nh * hd, h), f"{p}.self_attn.k_proj": (kv * hd, h),
                        f"{p}.self_attn.v_proj": (kv * hd, h), f"{p}.self_attn.o_proj": (h, nh * hd)})
        else:
            out.update({f"{p}.linear_attn.in_proj_qkv": (2 * kd + vd, h), f"{p}.linear_attn.in_proj_z": (vd, h),
                        f"{p}.linear_attn.in_proj_b": (hv, h), f"{p}.linear_attn.in_proj_a": (hv, h),
                        f"{p}.linear_attn.out_proj": (h, vd)})
        out.update({f"{p}.mlp.gate_proj": (inter, h), f"{p}.mlp.up_proj": (inter, h), f"{p}.mlp.down_proj": (h, inter)})
    return out


def write_adapter(config: dict, out: Path, seed: int, r: int = 16, alpha: int = 32) -> None:
    g = torch.Generator().manual_seed(seed)
    tensors = {}
    for path, (fan_out, fan_in) in lora_shapes(config["text_config"]).items():
        bound = 1 / math.sqrt(fan_in)
        tensors[f"base_model.model.{path}.lora_A.weight"] = (torch.rand(r, fan_in, generator=g) * 2 - 1) * bound
        tensors[f"base_model.model.{path}.lora_B.weight"] = torch.randn(fan_out, r, generator=g) * 1e-3
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "adapter_model.safetensors"), metadata={"format": "pt"})
    (out / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": r, "lora_alpha": alpha, "lora_dropout": 0.0,
        "target_modules": MODULES, "bias": "none", "use_rslora": False, "use_dora": False, "modules_to_save": None,
        "fan_in_fan_out": False, "init_lora_weights": True, "base_model_name_or_path": None}, indent=1))


def rows(paths, rng, ppo: bool) -> list:
    out = []
    for i, path in enumerate(paths):
        row = {"image": str(path), "name": rng.choice(NAMES), "code": "".join(str(rng.randint(0, 9)) for _ in range(6))}
        if i % 2:
            row["memory"] = ["".join(rng.choice("01") for _ in range(8)), "".join(rng.choice("01") for _ in range(8))]
        if ppo:
            row["adv"] = round(rng.gauss(0, 1), 4)
            row["vllm_logp"] = round(rng.uniform(-90, -70), 4)
        out.append(row)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--valid", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    import numpy as np
    np_rng, rng = np.random.default_rng(args.seed), random.Random(args.seed)
    frames = args.out / "frames"
    frames.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(args.rows):
        paths.append((frames / f"{i:05d}.png").resolve())
        frame(np_rng, 640, 480).save(paths[-1])
    for name, data in (("ppo", rows(paths, rng, True)), ("sft", rows(paths, rng, False)),
                       ("valid", rows(paths[: args.valid], rng, False))):
        (args.out / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    write_adapter(json.loads((args.model / "config.json").read_text()), args.out / "adapter", args.seed)
    print(json.dumps({"rows": args.rows, "out": str(args.out)}))


if __name__ == "__main__":
    main()
