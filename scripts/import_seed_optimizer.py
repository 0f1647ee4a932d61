"""Converts the seed trainer's optimizer.pt (torch.save of torch.optim.AdamW.state_dict() over the trainable LoRA
parameters of a PeftModel of Qwen3_5ForConditionalGeneration) to rlloop's optimizer.safetensors + sidecar JSON.

The seed's state is keyed by parameter index, in the order of model.parameters() restricted to the adapter's
LoRA tensors. That order is rebuilt here from the same classes on the meta device (no weights are read): the
checkpoint's config.json, PEFT's LoraConfig from the adapter's adapter_config.json. Each index then maps to the
PEFT key the adapter file uses ("…q_proj.lora_A.weight", PEFT's ".default" removed).
Usage: python import_seed_optimizer.py OPTIMIZER_PT ADAPTER_DIR MODEL_DIR OUT_SAFETENSORS
"""
import json
import os
import sys
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import save_file
from transformers import AutoConfig, Qwen3_5ForConditionalGeneration


def lora_keys_in_seed_order(adapter_dir: Path, model_dir: Path) -> list[str]:
    adapter = json.loads((adapter_dir / "adapter_config.json").read_text())
    with torch.device("meta"):
        model = Qwen3_5ForConditionalGeneration(AutoConfig.from_pretrained(model_dir))
    lora = LoraConfig(r=adapter["r"], lora_alpha=adapter["lora_alpha"], lora_dropout=0.0,
                      target_modules=adapter["target_modules"], task_type="CAUSAL_LM")
    peft = get_peft_model(model, lora)
    names = [n for n, p in peft.named_parameters() if p.requires_grad]
    return [n.replace(".default.", ".") for n in names]


def main():
    pt, adapter_dir, model_dir, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
    state = torch.load(pt, map_location="cpu", weights_only=True)
    keys = lora_keys_in_seed_order(adapter_dir, model_dir)
    group = state["param_groups"][0]
    if len(state["param_groups"]) != 1 or list(group["params"]) != list(range(len(keys))):
        raise SystemExit(f"{pt}: expected one parameter group over {len(keys)} LoRA tensors, got "
                         f"{[len(g['params']) for g in state['param_groups']]}")
    tensors, steps = {}, set()
    for i, key in enumerate(keys):
        s = state["state"].get(i) or state["state"].get(str(i))
        if s is None:
            raise SystemExit(f"{pt}: no state for parameter {i} ({key}); was the seed run ever stepped?")
        tensors[key + ".exp_avg"] = s["exp_avg"].float().contiguous()
        tensors[key + ".exp_avg_sq"] = s["exp_avg_sq"].float().contiguous()
        steps.add(int(s["step"]))
    if len(steps) != 1:
        raise SystemExit(f"{pt}: parameters have different step counts {sorted(steps)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out))
    side = {"step": steps.pop(), "lr": group["lr"], "betas": list(group["betas"]), "eps": group["eps"],
            "weight_decay": group["weight_decay"]}
    # The sidecar last and atomically: its presence marks a finished conversion (rlloop caches conversions).
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(side, indent=2) + "\n")
    os.replace(tmp, out.with_suffix(".json"))


if __name__ == "__main__":
    main()
