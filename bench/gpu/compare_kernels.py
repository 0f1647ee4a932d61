"""Compares two kernel_check.mjs outputs (ATen path vs CUDA kernels): log-probs max abs difference, LoRA gradients
as ||a - b|| / ||a|| over all tensors and the worst single tensor. Usage: compare_kernels.py ATEN_DIR CUDA_DIR"""
import json
import sys

import numpy as np

a_dir, b_dir = sys.argv[1:3]
meta = json.load(open(f"{a_dir}/meta.json"))
meta_b = json.load(open(f"{b_dir}/meta.json"))
la, lb = (np.fromfile(f"{d}/logp.bin", dtype=np.float32) for d in (a_dir, b_dir))
ga, gb = (np.fromfile(f"{d}/grads.bin", dtype=np.float32).astype(np.float64) for d in (a_dir, b_dir))
worst, offset = (0.0, ""), 0
for key, n in meta["keys"]:
    x, y = ga[offset:offset + n], gb[offset:offset + n]
    offset += n
    norm = np.linalg.norm(x)
    if norm > 0:
        rel = np.linalg.norm(x - y) / norm
        worst = max(worst, (rel, key))
print(json.dumps({
    "logp_max_abs": float(np.abs(la - lb).max()),
    "logp_range": [float(la.min()), float(la.max())],
    "grad_rel_l2": float(np.linalg.norm(ga - gb) / np.linalg.norm(ga)),
    "grad_worst_tensor_rel_l2": worst[0], "grad_worst_tensor": worst[1],
    "forward_ms": [meta["forwardMs"], meta_b["forwardMs"]], "backward_ms": [meta["backwardMs"], meta_b["backwardMs"]],
}))
