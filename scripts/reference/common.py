"""Shared set-up of the Python reference scripts: an fp32, TF32-off, CPU torch (qwen35.md §16/§17: TF32 moves
transformers' conv paths by up to 3e-2, so goldens are made with it off), and small writers for the outputs the
TypeScript tests read (safetensors + JSON). Nothing here computes a golden."""
import json
import os
from pathlib import Path

import torch
from safetensors.torch import save_file


def reference_torch(threads: int = 2) -> None:
    """fp32 on CPU with TF32 disabled, deterministic kernels, and few threads (CI has 2 cores)."""
    torch.set_num_threads(threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_default_dtype(torch.float32)
    torch.use_deterministic_algorithms(True)


def save_tensors(path: Path, tensors: dict) -> None:
    """safetensors file of contiguous CPU tensors (float32 stays float32, ints become int32 for JS)."""
    out = {}
    for name, t in tensors.items():
        t = t.detach().cpu().contiguous()
        if t.dtype in (torch.int64, torch.int16, torch.uint8, torch.bool):
            t = t.to(torch.int32)
        out[name] = t
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(out, str(path), metadata={"format": "pt"})


def write_json(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(value, indent=1))
    os.replace(tmp, path)


def read_json(path: Path):
    return json.loads(Path(path).read_text())
