"""How close a bfloat16 PPO round's LoRA update is to a float32 round's from the same adapter and rows: the
cosine and the relative L2 distance of the two updates (trained adapter minus the starting one, every tensor
flattened into one vector), and per tensor the worst cosine. Usage:
  python3 bench/gpu/update_cosine.py START_ADAPTER_DIR FLOAT32_OUT_DIR OTHER_OUT_DIR..."""
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file


def adapter(d: str) -> dict:
    files = sorted(Path(d).rglob("adapter_model.safetensors"))
    if not files:
        sys.exit(f"no adapter_model.safetensors under {d}")
    return {k: v.double() for k, v in load_file(str(files[-1])).items()}


start = adapter(sys.argv[1])
ref = adapter(sys.argv[2])
names = sorted(start)
ref_delta = {n: ref[n] - start[n] for n in names}
ref_flat = torch.cat([ref_delta[n].flatten() for n in names])
for other in sys.argv[3:]:
    got = adapter(other)
    delta = {n: got[n] - start[n] for n in names}
    flat = torch.cat([delta[n].flatten() for n in names])
    per = [(torch.nn.functional.cosine_similarity(delta[n].flatten(), ref_delta[n].flatten(), dim=0).item(), n)
           for n in names if ref_delta[n].norm() > 0]
    worst = min(per)
    print(json.dumps({
        "run": other, "reference": sys.argv[2], "tensors": len(names),
        "cosine": torch.nn.functional.cosine_similarity(flat, ref_flat, dim=0).item(),
        "relative_l2": ((flat - ref_flat).norm() / ref_flat.norm()).item(),
        "update_norm_ratio": (flat.norm() / ref_flat.norm()).item(),
        "worst_tensor_cosine": worst[0], "worst_tensor": worst[1],
    }))
