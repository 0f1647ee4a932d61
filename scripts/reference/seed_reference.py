"""A fresh Python implementation of the seed trainer's algorithm (seed/README.md) for the trainer's tests: one
process on CPU, transformers + PEFT + torch.optim.AdamW, and the row order given on the command line (--orders: a
JSON list with one list of row indices per epoch; rlloop's batching.ts writes the same order).

Numerics: the forward and backward run in --dtype (float64 by default: the exact gradients that rlloop's fp32 run
and the seed's own fp32 run both approximate); the update is the seed's, whatever the dtype: float32 LoRA weights
(masters) and torch.optim.AdamW on them. Why not all fp32: AdamW's first step moves each element by about
lr·g/(|g| + 1e-8), so elements whose gradient is near zero or near eps amplify fp32 gradient noise; measured on the
trainer fixture (one SFT batch of 8 rows), transformers fp32 eager vs fp32 sdpa, and fp32 vs float64, each differ
in the sign of one LoRA gradient element. Why not all float64: at the seed's PPO lr (3e-6) a step is only a few
hundred float32 ulps of a weight and lr·weight_decay (3e-8) is below half an ulp, so float32 weights round the decay
away every step, as the seed's and rlloop's do; float64 weights would keep it.

  sft  mean cross-entropy over the code digits and <|im_end|>; one AdamW step per batch (weight decay 0.01),
       clip_grad_norm_ 1.0, lr x min(1, (u+1)/10) x 0.5(1 + cos(pi u / total)); accuracy on --valid after each
       epoch -> valid.json; starts from --adapter when given, else a new LoRA (r 16, alpha 32).
  ppo  continues --adapter (and optimizer.pt beside it if present, lr reset) with --ref as a frozen adapter; old and
       ref log-probs of the code tokens once (no grad, batches of 2 x batch, file order); then per epoch: ratio =
       exp(sum lp - sum old), pg = -min(ratio A, clip(ratio, 0.8, 1.2) A), kl = sum exp(ref - lp) - (ref - lp) - 1,
       loss = mean(pg + 0.02 kl) / accumulation, a step every `accumulation` forwards and after the epoch's last.
Outputs in --out: the adapter (PEFT save_pretrained, tensors stored as float32 like the seed's), optimizer.pt (AdamW
state_dict, the seed's file) and the same state as optimizer.safetensors + optimizer.json (rlloop's layout), stats.json (ppo; the seed's fields, rounded to 4 decimals, plus "raw" unrounded) or
valid.json (sft).
Usage: python seed_reference.py sft|ppo --model DIR --data ROWS --orders ORDERS --out DIR [--adapter DIR] [--ref DIR]
       [--valid ROWS] [--prompt TEMPLATE] [--epochs N --lr X --batch N --accumulation N --max-updates N]
       [--dtype float64|float32]
"""
import argparse
import json
import math
from pathlib import Path

import jinja2
import torch
from peft import LoraConfig, PeftModel, get_peft_model
from PIL import Image
from transformers import AutoProcessor, Qwen3_5ForConditionalGeneration

from common import reference_torch
from tiny_model import LORA_TARGETS

END = "<|im_end|>"
CLIP, BETA, MAX_NORM = 0.2, 0.02, 1.0


class Rows:
    """The rows of a jsonl file and their collation into one right-padded batch."""

    def __init__(self, path: Path, processor, prompt: jinja2.Template, dtype: torch.dtype):
        self.rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        self.processor, self.prompt, self.dtype = processor, prompt, dtype
        self.n = len(self.rows[0]["code"])

    def text(self, row) -> str:
        user = self.prompt.render(name=row["name"], memory=row.get("memory"))
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": user}]}]
        return self.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                                  enable_thinking=False) + row["code"] + END

    def batch(self, indices):
        rows = [self.rows[i] for i in indices]
        inputs = self.processor(text=[self.text(r) for r in rows],
                                images=[Image.open(r["image"]).convert("RGB") for r in rows],
                                padding=True, padding_side="right", return_tensors="pt")
        return {k: v.to(self.dtype) if v.is_floating_point() else v for k, v in inputs.items()}, rows


def scored_logprobs(model, inputs, k: int):
    """(B, k) log-probs of each row's last k tokens, and whether the argmax predicted each of them."""
    logits = model(**inputs, use_cache=False).logits
    ends = inputs["attention_mask"].sum(1).tolist()
    picked = torch.stack([logits[i, e - k - 1:e - 1] for i, e in enumerate(ends)])
    targets = torch.stack([inputs["input_ids"][i, e - k:e] for i, e in enumerate(ends)])
    lp = picked.log_softmax(-1).gather(-1, targets[..., None])[..., 0]
    return lp, picked.argmax(-1) == targets


def lora_parameters(model):
    return [(n, p) for n, p in model.named_parameters() if "lora_" in n and ".default." in n]


class Masters:
    """The seed's update: float32 copies of the trainable LoRA weights and torch's AdamW over them (weight decay
    0.01, clip_grad_norm_ 1.0). Gradients accumulate in the model's parameters (in the forward's dtype) and are cast
    to float32 at each step; the stepped weights are copied back into the model."""

    def __init__(self, named, lr: float):
        self.names = [n for n, _ in named]
        self.params = [p for _, p in named]
        self.masters = [p.detach().float().clone() for p in self.params]
        self.opt = torch.optim.AdamW(self.masters, lr=lr, weight_decay=0.01)

    @torch.no_grad()
    def step(self, lr: float) -> None:
        for m, p in zip(self.masters, self.params):
            m.grad = p.grad.float()
        torch.nn.utils.clip_grad_norm_(self.masters, MAX_NORM)
        for g in self.opt.param_groups:
            g["lr"] = lr
        self.opt.step()
        for m, p in zip(self.masters, self.params):
            p.copy_(m)
            p.grad = m.grad = None


def sft(args, model, data: Rows, valid: Rows | None, orders):
    opt = Masters(lora_parameters(model), args.lr)
    batches = [[order[i:i + args.batch] for i in range(0, len(order), args.batch)] for order in orders]
    total = min(args.max_updates or 10**9, sum(len(b) for b in batches))
    update, losses, acc = 0, [], None
    for epoch in range(args.epochs):
        for indices in batches[epoch]:
            inputs, _ = data.batch(indices)
            lp, _ = scored_logprobs(model, inputs, data.n + 1)
            loss = -lp.mean()
            loss.backward()
            opt.step(args.lr * min(1, (update + 1) / 10) * 0.5 * (1 + math.cos(math.pi * update / total)))
            losses.append(loss.item())
            update += 1
            if update >= total:
                break
        if valid is not None:
            acc = accuracy(model, valid, args.batch)
            (args.out / "valid.json").parent.mkdir(parents=True, exist_ok=True)
            save_adapter(model, args.out)
            (args.out / "valid.json").write_text(json.dumps({"epoch": epoch + 1, "updates": update, **acc}))
        if update >= total:
            break
    save_adapter(model, args.out)
    torch.save(opt.opt.state_dict(), args.out / "optimizer.pt")
    save_optimizer(opt, args.out)
    (args.out / "losses.json").write_text(json.dumps(losses))


@torch.no_grad()
def accuracy(model, valid: Rows, batch: int) -> dict:
    digits = codes = rows = 0
    for i in range(0, len(valid.rows), batch):
        inputs, _ = valid.batch(range(i, min(i + batch, len(valid.rows))))
        _, right = scored_logprobs(model, inputs, valid.n + 1)
        right = right[:, :-1]
        digits, codes, rows = digits + right.sum().item(), codes + right.all(1).sum().item(), rows + len(right)
    return {"digit_acc": round(digits / rows / valid.n, 4), "code_acc": round(codes / rows, 4), "rows": rows}


@torch.no_grad()
def fixed_logprobs(model, data: Rows, batch: int, adapter: str) -> torch.Tensor:
    model.set_adapter(adapter)
    out = []
    for i in range(0, len(data.rows), 2 * batch):
        inputs, _ = data.batch(range(i, min(i + 2 * batch, len(data.rows))))
        out.append(scored_logprobs(model, inputs, data.n + 1)[0][:, :data.n])
    return torch.cat(out)


def load_rlloop_optimizer(opt: Masters, adapter: Path) -> None:
    """rlloop's optimizer.safetensors (<PEFT key>.exp_avg/.exp_avg_sq) + optimizer.json (step) -> AdamW state."""
    from safetensors.torch import load_file
    moments = load_file(str(adapter / "optimizer.safetensors"))
    step = json.loads((adapter / "optimizer.json").read_text())["step"]
    moment = lambda name, which: moments[name.replace(".default.", ".") + which].float()
    state = {"state": {i: {"step": torch.tensor(float(step)), "exp_avg": moment(n, ".exp_avg"),
                           "exp_avg_sq": moment(n, ".exp_avg_sq")}
                       for i, n in enumerate(opt.names)},
             "param_groups": [{**{k: v for k, v in opt.opt.param_groups[0].items() if k != "params"},
                               "params": list(range(len(opt.names)))}]}
    opt.opt.load_state_dict(state)


def save_optimizer(opt: Masters, out: Path) -> None:
    """The AdamW state also in rlloop's layout (optimizer.safetensors + optimizer.json), for the tests to read."""
    from safetensors.torch import save_file
    state = opt.opt.state_dict()["state"]
    tensors = {}
    for i, name in enumerate(opt.names):
        key = name.replace(".default.", ".")
        tensors[key + ".exp_avg"] = state[i]["exp_avg"].contiguous()
        tensors[key + ".exp_avg_sq"] = state[i]["exp_avg_sq"].contiguous()
    save_file(tensors, str(out / "optimizer.safetensors"), metadata={"format": "pt"})
    group = opt.opt.param_groups[0]
    (out / "optimizer.json").write_text(json.dumps({"step": int(state[0]["step"].item()), "lr": group["lr"],
                                                    "betas": list(group["betas"]), "eps": group["eps"],
                                                    "weight_decay": group["weight_decay"]}))


def save_adapter(model, out: Path) -> None:
    """The policy adapter in PEFT layout with float32 tensors (what the seed and rlloop write)."""
    from safetensors.torch import load_file, save_file
    model.save_pretrained(out, selected_adapters=["default"])
    path = out / "adapter_model.safetensors"
    save_file({k: v.float().contiguous() for k, v in load_file(str(path)).items()}, str(path), metadata={"format": "pt"})


def ppo(args, model, data: Rows, orders):
    ref_lp = fixed_logprobs(model, data, args.batch, "ref")
    old_lp = fixed_logprobs(model, data, args.batch, "default")
    model.set_adapter("default")
    for name, p in model.named_parameters():
        p.requires_grad = "lora_" in name and ".default." in name
    opt = Masters(lora_parameters(model), args.lr)
    if (args.adapter / "optimizer.pt").exists():
        opt.opt.load_state_dict(torch.load(args.adapter / "optimizer.pt", weights_only=True))
    elif (args.adapter / "optimizer.safetensors").exists():
        load_rlloop_optimizer(opt, args.adapter)
    vllm = torch.tensor([r["vllm_logp"] for r in data.rows], dtype=torch.float64)
    gap = old_lp.sum(1).double() - vllm
    for epoch in range(args.epochs):
        groups = [orders[epoch][i:i + args.batch] for i in range(0, len(orders[epoch]), args.batch)]
        stats = []
        for step, indices in enumerate(groups):
            inputs, rows = data.batch(indices)
            idx = torch.tensor(indices)
            lp = scored_logprobs(model, inputs, data.n + 1)[0][:, :data.n]
            adv = torch.tensor([r["adv"] for r in rows], dtype=lp.dtype)
            ratio = (lp.sum(1) - old_lp[idx].sum(1)).exp()
            pg = -torch.min(ratio * adv, ratio.clamp(1 - CLIP, 1 + CLIP) * adv)
            d = ref_lp[idx] - lp
            kl = (d.exp() - d - 1).sum(1)
            ((pg + BETA * kl).mean() / args.accumulation).backward()
            if (step + 1) % args.accumulation == 0 or step + 1 == len(groups):
                opt.step(args.lr)
            stats.append([pg.mean().item(), kl.mean().item(), ((ratio - 1).abs() > CLIP).float().mean().item()])
    means = torch.tensor(stats, dtype=torch.float64).mean(0).tolist()
    raw = {"pg_loss": means[0], "kl": means[1], "clip_frac": means[2], "logp_gap": gap.mean().item(),
           "logp_gap_abs": gap.abs().mean().item()}
    save_adapter(model, args.out)
    torch.save(opt.opt.state_dict(), args.out / "optimizer.pt")
    save_optimizer(opt, args.out)
    stats = {**{k: round(v, 4) for k, v in raw.items()}, "rows": len(data.rows), "raw": raw}
    (args.out / "stats.json").write_text(json.dumps(stats))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["sft", "ppo"])
    for flag in ("--model", "--data", "--orders", "--out", "--adapter", "--ref", "--valid", "--prompt"):
        ap.add_argument(flag, type=Path)
    ap.add_argument("--epochs", type=int)
    ap.add_argument("--lr", type=float)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--accumulation", type=int, default=2)
    ap.add_argument("--max-updates", type=int)
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    args.epochs = args.epochs or (1 if args.mode == "sft" else 2)
    args.lr = args.lr or (1e-4 if args.mode == "sft" else 3e-6)
    reference_torch()
    processor = AutoProcessor.from_pretrained(args.model)
    prompt = jinja2.Template(args.prompt.read_text(), keep_trailing_newline=True)
    data = Rows(args.data, processor, prompt, dtype)
    orders = json.loads(args.orders.read_text())
    base = Qwen3_5ForConditionalGeneration.from_pretrained(args.model, dtype=dtype,
                                                           attn_implementation="eager")
    base.requires_grad_(False)
    if args.adapter is not None:
        model = PeftModel.from_pretrained(base, args.adapter, is_trainable=True)
    else:
        torch.manual_seed(0)
        model = get_peft_model(base, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM",
                                                target_modules=LORA_TARGETS))
    model.train()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.mode == "sft":
        valid = Rows(args.valid, processor, prompt, dtype) if args.valid else None
        sft(args, model, data, valid, orders)
    else:
        model.load_adapter(args.ref, adapter_name="ref")
        ppo(args, model, data, orders)


if __name__ == "__main__":
    main()
