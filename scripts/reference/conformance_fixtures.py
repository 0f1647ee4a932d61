"""Every fixture of the native conformance tests, made in one Python process (importing torch and transformers
costs more than the tiny models do): both tiny checkpoints, the test PNGs, transformers' forward goldens of both
batches on both models, and PEFT's LoRA goldens. The TypeScript tests run this once and cache the folder under
os.tmpdir(), keyed by the sha256 of scripts/reference/*.py and these arguments (test/helpers/fixtures.ts).

Layout of --out:
  manifest.json             models (tiny_model summaries), lora specs
  images/img*.png           test_images.py
  a/, b/                    tiny_model.py checkpoints (+ preprocessor_config.json)
  golden/<model>/<batch>.*  forward_golden.py
  lora/<model>/             lora_golden.py (adapter/, lora.json, lora.safetensors)
Usage: python conformance_fixtures.py --out DIR [--seed 0]
"""
import argparse
from pathlib import Path

from common import reference_torch, write_json
from forward_golden import load_reference_model, write_batch_golden
from batch import BATCHES
from lora_golden import write_lora_golden
from test_images import write_test_images
from tiny_model import build_tiny_model

# Rank and alpha per model: alpha/r = 3 and 2, so a scaling of alpha alone, 1/r or a swapped ratio shows.
LORA = {"a": {"r": 4, "alpha": 12}, "b": {"r": 8, "alpha": 16}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    reference_torch()
    out = args.out
    write_test_images(out / "images", args.seed)
    models = {}
    for name in LORA:
        models[name] = build_tiny_model(name, args.seed, out / name)
        model = load_reference_model(out / name)
        for i, batch in enumerate(BATCHES):
            write_batch_golden(model, out / name, batch, out, out / "golden" / name, args.seed + i)
        write_lora_golden(out / name, out / "golden" / name, out / "lora" / name, LORA[name]["r"],
                          LORA[name]["alpha"], args.seed)
    write_json(out / "manifest.json", {"models": models, "lora": LORA, "batches": list(BATCHES)})


if __name__ == "__main__":
    main()
