"""torch.optim.AdamW + clip_grad_norm_ applied to given parameters and gradients: the reference for the native
Optimizer (native-api.md "Optimizer"), which must equal it.

Input --tensors: a safetensors file with p0.<key> (the adapter before the first step) and g<s>.<key> for steps
s = 1..S (the gradients the module accumulated before step s, read back with model.gradients). --config: JSON
{steps: [{lr, maxGradNorm}], betas, eps, weightDecay}. Each step: p.grad = g<s>; total = clip_grad_norm_(params,
maxGradNorm); set lr; opt.step(). Output --out/adamw.safetensors: p<s>.<key> after every step, and --out/adamw.json
{gradNorms: [total norm before clipping per step]}.
Usage: python adamw_golden.py --tensors IN.safetensors --config IN.json --out DIR
"""
import argparse
from pathlib import Path

import torch
from safetensors.torch import load_file

from common import read_json, reference_torch, save_tensors, write_json


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tensors", type=Path, required=True)
    ap.add_argument("--config", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    reference_torch()
    tensors = load_file(str(args.tensors))
    config = read_json(args.config)
    keys = sorted(k[len("p0."):] for k in tensors if k.startswith("p0."))
    params = [torch.nn.Parameter(tensors[f"p0.{k}"].clone()) for k in keys]
    opt = torch.optim.AdamW(params, lr=config["steps"][0]["lr"], betas=tuple(config["betas"]), eps=config["eps"],
                            weight_decay=config["weightDecay"])
    out, norms = {}, []
    for s, step in enumerate(config["steps"], start=1):
        for k, p in zip(keys, params):
            p.grad = tensors[f"g{s}.{k}"].clone()
        norms.append(float(torch.nn.utils.clip_grad_norm_(params, step["maxGradNorm"])))
        for group in opt.param_groups:
            group["lr"] = step["lr"]
        opt.step()
        out.update({f"p{s}.{k}": p.detach().clone() for k, p in zip(keys, params)})
    save_tensors(args.out / "adamw.safetensors", out)
    write_json(args.out / "adamw.json", {"gradNorms": norms, "keys": keys})


if __name__ == "__main__":
    main()
