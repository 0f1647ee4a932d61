"""Writes a random-weight Qwen3.5 checkpoint with the real 9B shapes (qwen35.md §1) for GPU benchmarks.

No weights can be downloaded on the GPU machine, so the model is built from its config on the GPU with
transformers' own initialisation (seeded), the norm weights and GDN decay parameters perturbed so that (1+w) and
A_log matter, and saved with save_pretrained (bf16 safetensors shards) plus the Qwen3.5 preprocessor config.
Usage: python3 make_9b.py OUT_DIR [--layers N]   (--layers shrinks the depth for quick checks)
"""
import argparse
import json
import time
from pathlib import Path

import torch
from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

TEXT = dict(vocab_size=248320, hidden_size=4096, intermediate_size=12288, num_hidden_layers=32,
            num_attention_heads=16, num_key_value_heads=4, head_dim=256, linear_num_key_heads=16,
            linear_num_value_heads=32, linear_key_head_dim=128, linear_value_head_dim=128,
            linear_conv_kernel_dim=4, hidden_act="silu", rms_norm_eps=1e-6, tie_word_embeddings=False,
            max_position_embeddings=262144, full_attention_interval=4,
            rope_parameters={"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                             "mrope_section": [11, 11, 10], "mrope_interleaved": True})
VISION = dict(depth=27, hidden_size=1152, num_heads=16, intermediate_size=4304, hidden_act="gelu_pytorch_tanh",
              in_channels=3, patch_size=16, temporal_patch_size=2, spatial_merge_size=2, out_hidden_size=4096,
              num_position_embeddings=2304)
PREPROCESSOR = {"size": {"shortest_edge": 65536, "longest_edge": 16777216}, "patch_size": 16,
                "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5],
                "image_std": [0.5, 0.5, 0.5], "do_rescale": True, "rescale_factor": 1 / 255,
                "do_normalize": True, "do_resize": True, "resample": 3, "do_convert_rgb": True,
                "image_processor_type": "Qwen2VLImageProcessorFast", "processor_class": "Qwen3VLProcessor"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    text = dict(TEXT, num_hidden_layers=args.layers)
    config = Qwen3_5Config(text_config=text, vision_config=VISION, image_token_id=248056, video_token_id=248057,
                           vision_start_token_id=248053, vision_end_token_id=248054, tie_word_embeddings=False)
    start = time.monotonic()
    with torch.device("cuda"):
        model = Qwen3_5ForConditionalGeneration(config).to(torch.bfloat16)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name or "q_norm" in name or "k_norm" in name:
                p.add_(torch.randn_like(p) * 0.1)
            elif name.endswith("A_log") or name.endswith("dt_bias"):
                p.copy_(torch.randn_like(p) * 0.5)
    n = sum(p.numel() for p in model.parameters())
    model.save_pretrained(args.out, safe_serialization=True, max_shard_size="5GB")
    (args.out / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR, indent=2))
    print(json.dumps({"params": n, "layers": args.layers, "seconds": round(time.monotonic() - start, 1)}))


if __name__ == "__main__":
    main()
