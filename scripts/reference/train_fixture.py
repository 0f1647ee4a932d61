"""The trainer tests' fixture: tiny Qwen3.5 checkpoint "a" (tiny_model.py) with the tiny tokenizer
(make_tokenizer.py; the config's token ids pointed at its special tokens), test PNGs (test_images.py), two random
LoRA adapters in PEFT layout (policy start and reference; A and B both non-zero so every tensor gets a gradient),
a seed PPO round's output to start PPO from (seed-round/: the policy adapter after two torch AdamW steps and the
seed's optimizer.pt), and rows: sft.jsonl, valid.jsonl, ppo.jsonl (absolute image paths, code length 3).
The fixture is built in a temporary folder and then renamed (the tests' cache), so the rows name their images under
FINAL_DIR, the folder the fixture will have once renamed (default: OUT_DIR).
Usage: python train_fixture.py CHAT_TEMPLATE OUT_DIR [FINAL_DIR]
"""
import json
import random
import subprocess
import sys
from pathlib import Path

import torch

from common import reference_torch
from lora_golden import attach_lora
from test_images import write_test_images
from tiny_model import build_tiny_model

NAMES = ["red cup", "blue ball", "door", "green chair", "yellow box", "plant", "person", "bottle"]


def write_model(out: Path, template: Path) -> None:
    build_tiny_model("a", 0, out)
    preprocessor = (out / "preprocessor_config.json").read_text()  # tiny_model's (small min_pixels): keep it
    ids = json.loads(subprocess.run([sys.executable, str(Path(__file__).with_name("make_tokenizer.py")),
                                     str(template), str(out)], check=True, capture_output=True, text=True).stdout)
    config = json.loads((out / "config.json").read_text())
    config.update(image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
                  vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])
    config["text_config"].update(eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"], bos_token_id=None)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / "preprocessor_config.json").write_text(preprocessor)


def write_adapter(model_dir: Path, out: Path, seed: int) -> None:
    from transformers import Qwen3_5ForConditionalGeneration
    model = Qwen3_5ForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32)
    attach_lora(model, 16, 32, seed).save_pretrained(out)


def write_seed_round(model_dir: Path, adapter_dir: Path, out: Path) -> None:
    """What a seed PPO round leaves: the adapter after AdamW steps (torch, weight decay 0.01; random gradients of the
    size of this fixture's PPO gradients) and torch.save(AdamW.state_dict()) as optimizer.pt, the parameters in the
    seed's order. Starting PPO from it makes every compared AdamW step run with a non-zero second moment: a fresh
    AdamW's first step moves each element by about lr·sign(g), which turns fp32 gradient noise in elements whose
    gradient is near zero into update differences of the size of the update (see seed_reference.py)."""
    from peft import PeftModel
    from transformers import Qwen3_5ForConditionalGeneration
    model = Qwen3_5ForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32)
    peft = PeftModel.from_pretrained(model, adapter_dir, is_trainable=True)
    params = [p for _, p in peft.named_parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=3e-6, weight_decay=0.01)
    gen = torch.Generator().manual_seed(3)
    for _ in range(2):
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen) * 3e-4
        opt.step()
        opt.zero_grad(set_to_none=True)
    peft.save_pretrained(out)
    torch.save(opt.state_dict(), out / "optimizer.pt")


def rows(images: dict, count: int, seed: int, ppo: bool) -> list:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        row = {"image": str(images[f"img{i % len(images)}"]), "name": NAMES[(i * 3 + seed) % len(NAMES)],
               "code": "".join(str(rng.randint(0, 9)) for _ in range(3))}
        if i % 2 == 1:
            row["memory"] = ["".join(rng.choice("01") for _ in range(4)), rng.choice("01")]
        if ppo:
            row["adv"] = round(rng.uniform(-1.5, 1.5), 4)
            row["vllm_logp"] = round(rng.uniform(-12.0, -6.0), 4)
        out.append(row)
    return out


def main():
    template, out = Path(sys.argv[1]), Path(sys.argv[2])
    final = Path(sys.argv[3]) if len(sys.argv) > 3 else out
    reference_torch()
    write_model(out / "model", template)
    images = {name: final.resolve() / "images" / path.name for name, path in write_test_images(out / "images").items()}
    write_adapter(out / "model", out / "adapter", seed=1)
    write_adapter(out / "model", out / "ref", seed=2)
    write_seed_round(out / "model", out / "adapter", out / "seed-round")
    for name, count, seed, ppo in (("sft", 8, 3, False), ("valid", 5, 4, False), ("ppo", 8, 5, True)):
        text = "".join(json.dumps(r) + "\n" for r in rows(images, count, seed, ppo))
        (out / f"{name}.jsonl").write_text(text)


if __name__ == "__main__":
    main()
