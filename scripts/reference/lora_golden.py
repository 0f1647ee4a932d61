"""LoRA goldens from PEFT on a tiny Qwen3.5 checkpoint: an adapter saved by PEFT, the log-probs it gives, and the
gradient of every LoRA tensor under the seed's two objectives (native-api.md "Forward, log-probs, backward"):
  sft  loss = scale * mean over rows and the K scored tokens of -logp
  ppo  ratio = exp(sum_n lp - old); pg = -min(ratio A, clip(ratio, 1 - c, 1 + c) A);
       kl = sum_n exp(ref - lp) - (ref - lp) - 1; loss = scale * mean(weight * (pg + beta kl))
       (seed/bt_train.py's ppo(), with a per-row weight; lp are the first n = K - 1 scored tokens)
PEFT leaves B = 0 after get_peft_model, which would make every gradient to A zero; all A and B are therefore
re-drawn from a seeded generator before saving. The PPO inputs put one row's ratio above 1 + clip with A > 0
(clipped: no policy gradient), one inside the clip range and one above 1 + clip with A < 0 (unclipped), each far
from the clip boundaries compared with the 1e-4 log-prob tolerance.

Gradients come from one forward per unpadded row (the batch mean is taken over the stacked rows), fp32, TF32 off.
Outputs (under --out): adapter/ (PEFT save_pretrained), lora.json (LoRA spec, objective inputs and per-row
ratio/pg/kl/loss), lora.safetensors: logp.<batch>.row.<r> [K] with the adapter, grad.<ppo|sft>.<PEFT key>.
Usage: python lora_golden.py --model DIR --golden DIR(forward_golden's --out) --out DIR --r 4 --alpha 12
"""
import argparse
import math
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model

from batch import BATCHES, load_processor, model_inputs, rows_from_json
from common import read_json, reference_torch, save_tensors, write_json
from forward_golden import load_reference_model
from tiny_model import LORA_TARGETS

GRAD_BATCH = "rows"  # the objectives run on the three-row batch
PPO = {"clip": 0.2, "beta": 0.02, "scale": 0.5, "weight": [1.0, 0.5, 2.0], "adv": [1.0, -0.7, -1.3],
       "old_offset": [-0.5, 0.05, -0.4]}  # old = sum lp + offset -> ratios e^0.5, e^-0.05, e^0.4
SFT = {"scale": 0.7}


def peft_key(parameter_name: str) -> str:
    """PEFT's in-memory name (…lora_A.default.weight) -> the saved adapter key (…lora_A.weight)."""
    return parameter_name.replace(".default.", ".")


def attach_lora(model, r: int, alpha: int, seed: int):
    config = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=0.0, target_modules=LORA_TARGETS,
                        task_type="CAUSAL_LM", bias="none")
    peft_model = get_peft_model(model, config)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_A" in name:
                bound = 1 / math.sqrt(p.shape[1])
                p.copy_(torch.rand(p.shape, generator=gen) * 2 * bound - bound)
            elif "lora_B" in name:
                p.copy_(torch.rand(p.shape, generator=gen) * 0.4 - 0.2)
    return peft_model


def row_logp(model, row, images: dict, image_token_id: int) -> torch.Tensor:
    """[K] log-probs of the scored tokens of one unpadded row (with grad when enabled)."""
    inputs = model_inputs(row.input_ids, [images[n] for n in row.images], image_token_id)
    logits = model(**inputs, use_cache=False).logits[0]
    s, k = row.score_start, row.score_count
    targets = torch.tensor(row.input_ids[s: s + k])
    return logits[s - 1: s + k - 1].log_softmax(-1).gather(-1, targets[:, None])[:, 0]


def batch_logp(model, rows, images, image_token_id) -> torch.Tensor:
    return torch.stack([row_logp(model, row, images, image_token_id) for row in rows])


def ppo_loss(lp: torch.Tensor, old, ref, adv, weight, clip, beta, scale):
    n = ref.shape[1]
    code = lp[:, :n]
    ratio = (code.sum(1) - old).exp()
    pg = -torch.min(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv)
    d = ref - code
    kl = (d.exp() - d - 1).sum(1)
    return scale * (weight * (pg + beta * kl)).mean(), ratio, pg, kl


def gradients(peft_model, tag: str, tensors: dict) -> None:
    for name, p in peft_model.named_parameters():
        if p.requires_grad:
            tensors[f"grad.{tag}.{peft_key(name)}"] = p.grad.detach().clone()
            p.grad = None


def write_lora_golden(model_dir: Path, golden_dir: Path, out: Path, r: int, alpha: int, seed: int) -> dict:
    model = load_reference_model(model_dir)
    image_token_id = model.config.image_token_id
    peft_model = attach_lora(model, r, alpha, seed)
    peft_model.save_pretrained(str(out / "adapter"))
    processor = load_processor(model_dir)
    tensors = {}
    batches = {}
    for name in BATCHES:
        rows, images = rows_from_json(read_json(golden_dir / f"{name}.json")["rows"], processor, model_dir.parent)
        batches[name] = (rows, images)
        with torch.no_grad():
            for i, lp in enumerate(batch_logp(peft_model, rows, images, image_token_id)):
                tensors[f"logp.{name}.row.{i}"] = lp

    rows, images = batches[GRAD_BATCH]
    gen = torch.Generator().manual_seed(seed + 1)
    lp = batch_logp(peft_model, rows, images, image_token_id)
    n = lp.shape[1] - 1
    old = lp.detach()[:, :n].sum(1) + torch.tensor(PPO["old_offset"])
    ref = lp.detach()[:, :n] + torch.randn((len(rows), n), generator=gen) * 0.3
    adv, weight = torch.tensor(PPO["adv"]), torch.tensor(PPO["weight"])
    loss, ratio, pg, kl = ppo_loss(lp, old, ref, adv, weight, PPO["clip"], PPO["beta"], PPO["scale"])
    loss.backward()
    gradients(peft_model, "ppo", tensors)

    sft_loss = SFT["scale"] * -batch_logp(peft_model, rows, images, image_token_id).mean()
    sft_loss.backward()
    gradients(peft_model, "sft", tensors)

    save_tensors(out / "lora.safetensors", tensors)
    golden = {
        "r": r, "alpha": alpha, "targetModules": LORA_TARGETS, "gradBatch": GRAD_BATCH,
        "keys": sorted(k[len("grad.ppo."):] for k in tensors if k.startswith("grad.ppo.")),
        "ppo": {"n": n, "old": old.tolist(), "ref": ref.reshape(-1).tolist(), "adv": PPO["adv"],
                "weight": PPO["weight"], "clip": PPO["clip"], "beta": PPO["beta"], "scale": PPO["scale"],
                "loss": float(loss.detach()), "ratio": ratio.tolist(), "pg": pg.tolist(), "kl": kl.tolist()},
        "sft": {"scale": SFT["scale"], "loss": float(sft_loss.detach())},
    }
    write_json(out / "lora.json", golden)
    return golden


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--golden", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--r", type=int, default=4)
    ap.add_argument("--alpha", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    reference_torch()
    write_lora_golden(args.model, args.golden, args.out, args.r, args.alpha, args.seed)


if __name__ == "__main__":
    main()
