"""Tiny random Qwen3.5 checkpoints (qwen35.md §16) for the conformance tests, written with transformers'
own Qwen3_5ForConditionalGeneration and save_pretrained so the native loader reads real key names.

Two configurations that differ in every dimension the native code could hard-wire:
  a  §16 as written: hidden 64, 8 layers L L L F L L L F, 4/2 attention heads of 64, GDN 2 key / 4 value heads
     of 16, vision depth 2, an 8x8 position-embedding grid; float32, one model.safetensors plus two mtp.* tensors
     (real checkpoints carry them and loaders must skip them).
  b  hidden 96, 4 layers F L F L (a full-attention layer first), 6/3 heads of 48 (rotary dim 12, mrope [2,2,2]),
     GDN 2 key heads of 24 and 6 value heads of 16 (r = 3, key dim != value dim), vision depth 1 with 2 heads,
     a 10x10 position grid; stored as bfloat16 except A_log (float32), in three-plus shards with an index, as the
     real 9B checkpoint is.
Every parameter is re-drawn after construction (transformers' init leaves text norms at zero, which would hide a
(1 + w) versus w mistake), from one seeded generator, so a seed gives the same files byte for byte.

Usage: python tiny_model.py --config a|b --seed 0 --out DIR
"""
import argparse
import math
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

from common import reference_torch, write_json

# The seed trainer's LoRA targets (seed/bt_train.py MODULES); PEFT fullmatches it against module paths.
LORA_TARGETS = (r"model.language_model.*\.(q_proj|k_proj|v_proj|o_proj|in_proj_qkv|in_proj_z|in_proj_b|in_proj_a"
                r"|out_proj|gate_proj|up_proj|down_proj)$")

L, F = "linear_attention", "full_attention"

CONFIGS = {
    "a": {
        "text": dict(vocab_size=1024, hidden_size=64, intermediate_size=128, num_hidden_layers=8,
                     layer_types=[L, L, L, F, L, L, L, F], num_attention_heads=4, num_key_value_heads=2,
                     head_dim=64, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
                     linear_value_head_dim=16, linear_conv_kernel_dim=4, mrope_section=[3, 3, 2]),
        "vision": dict(depth=2, hidden_size=64, num_heads=4, intermediate_size=128, out_hidden_size=64,
                       num_position_embeddings=64),
        "tokens": dict(vision_start_token_id=998, vision_end_token_id=999, image_token_id=1000,
                       video_token_id=1001),
        "storage": {"dtype": "float32", "max_shard_size": None, "mtp": True},
    },
    "b": {
        "text": dict(vocab_size=1536, hidden_size=96, intermediate_size=160, num_hidden_layers=4,
                     layer_types=[F, L, F, L], num_attention_heads=6, num_key_value_heads=3, head_dim=48,
                     linear_num_key_heads=2, linear_num_value_heads=6, linear_key_head_dim=24,
                     linear_value_head_dim=16, linear_conv_kernel_dim=4, mrope_section=[2, 2, 2]),
        "vision": dict(depth=1, hidden_size=48, num_heads=2, intermediate_size=96, out_hidden_size=96,
                       num_position_embeddings=100),
        "tokens": dict(vision_start_token_id=1528, vision_end_token_id=1529, image_token_id=1530,
                       video_token_id=1531),
        "storage": {"dtype": "bfloat16", "max_shard_size": "300KB", "mtp": False},
    },
}

# §8 preprocessor_config.json of Qwen3.5, except min_pixels (size.shortest_edge) lowered from 256² to 64² so
# that small test images keep small grids; the test images are sized so smart_resize still rounds, upscales
# and rounds half to even.
PREPROCESSOR = {
    "size": {"shortest_edge": 64 * 64, "longest_edge": 16777216},
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "do_convert_rgb": True,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "rescale_factor": 1 / 255,
    "resample": 3,
    "processor_class": "Qwen3VLProcessor",
    "image_processor_type": "Qwen2VLImageProcessorFast",
}


def make_config(name: str) -> Qwen3_5Config:
    spec = CONFIGS[name]
    text = dict(spec["text"])
    mrope = text.pop("mrope_section")
    text["rope_parameters"] = {"rope_type": "default", "rope_theta": 10_000_000.0, "partial_rotary_factor": 0.25,
                               "mrope_section": mrope, "mrope_interleaved": True}
    text["rms_norm_eps"] = 1e-6
    text["tie_word_embeddings"] = False
    vision = dict(spec["vision"], patch_size=16, temporal_patch_size=2, spatial_merge_size=2, in_channels=3,
                  hidden_act="gelu_pytorch_tanh")
    config = Qwen3_5Config(text_config=text, vision_config=vision, tie_word_embeddings=False, **spec["tokens"])
    config._attn_implementation = "eager"
    return config


def uniform(gen: torch.Generator, shape, low: float, high: float) -> torch.Tensor:
    return torch.rand(shape, generator=gen) * (high - low) + low


def random_parameter(name: str, shape: torch.Size, gen: torch.Generator) -> torch.Tensor:
    """A draw whose scale keeps activations O(1) through the layers; the ranges make each norm flavour visible."""
    leaf = name.rsplit(".", 1)[-1]
    if name.endswith("A_log"):
        return uniform(gen, shape, -1.5, 0.5)  # decay rate exp(A_log) in (0.22, 1.65)
    if name.endswith("dt_bias"):
        return uniform(gen, shape, -1.0, 1.0)
    if name.endswith("linear_attn.norm.weight"):
        return uniform(gen, shape, 0.5, 1.5)  # gated RMSNorm: plain weight
    if name.startswith("model.language_model") and leaf == "weight" and len(shape) == 1:
        return uniform(gen, shape, -0.5, 0.5)  # zero-centred RMSNorms: used as (1 + w)
    if name.startswith("model.visual") and ("norm" in name) and leaf == "weight":
        return uniform(gen, shape, 0.5, 1.5)  # vision LayerNorms
    if leaf == "bias":
        return uniform(gen, shape, -0.1, 0.1)
    if name.endswith("embed_tokens.weight"):
        return uniform(gen, shape, -1.0, 1.0)
    if name.endswith("pos_embed.weight"):
        return uniform(gen, shape, -0.5, 0.5)
    if name.endswith("conv1d.weight"):
        return uniform(gen, shape, -0.5, 0.5)
    fan_in = math.prod(shape[1:])
    bound = 1 / math.sqrt(fan_in)
    if name == "lm_head.weight":
        bound *= 3  # logits of a few units, so log-probs are not all near -log(vocab)
    return uniform(gen, shape, -bound, bound)


def randomise(model: torch.nn.Module, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(random_parameter(name, p.shape, gen))


def add_mtp_tensors(out: Path, config: Qwen3_5Config, seed: int) -> None:
    """Real Qwen3.5 checkpoints carry a multi-token-prediction head (mtp.*) that transformers skips on load."""
    path = out / "model.safetensors"
    tensors = load_file(str(path))
    gen = torch.Generator().manual_seed(seed + 1)
    hidden = config.text_config.hidden_size
    tensors["mtp.fc.weight"] = uniform(gen, (hidden, 2 * hidden), -0.1, 0.1)
    tensors["mtp.norm.weight"] = uniform(gen, (hidden,), -0.5, 0.5)
    save_file(tensors, str(path), metadata={"format": "pt"})


def build_tiny_model(name: str, seed: int, out: Path) -> dict:
    """Writes the checkpoint folder; returns a summary for the fixture manifest."""
    config = make_config(name)
    torch.manual_seed(seed)
    model = Qwen3_5ForConditionalGeneration(config).eval()
    randomise(model, seed)
    storage = CONFIGS[name]["storage"]
    if storage["dtype"] == "bfloat16":
        model.to(torch.bfloat16)
        for module in model.modules():
            if hasattr(module, "A_log"):
                module.A_log.data = module.A_log.data.float()  # mixed dtypes, as some real checkpoints
    out.mkdir(parents=True, exist_ok=True)
    kwargs = {"max_shard_size": storage["max_shard_size"]} if storage["max_shard_size"] else {}
    model.save_pretrained(out, **kwargs)
    if storage["mtp"]:
        add_mtp_tensors(out, config, seed)
    write_json(out / "preprocessor_config.json", PREPROCESSOR)
    return {
        "name": name,
        "dir": out.name,
        "seed": seed,
        "storage": storage,
        "hiddenSize": config.text_config.hidden_size,
        "numLayers": config.text_config.num_hidden_layers,
        "layerTypes": config.text_config.layer_types,
        "vocabSize": config.text_config.vocab_size,
        **{k: getattr(config, k) for k in CONFIGS[name]["tokens"]},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", choices=sorted(CONFIGS), required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    reference_torch()
    summary = build_tiny_model(args.config, args.seed, args.out)
    print(summary)


if __name__ == "__main__":
    main()
