"""The demo's model folder: a tiny random Qwen3.5 (tiny_model.py config "a": 8 layers LLLFLLLF, hidden 64, a
2-block vision tower) with the tiny trained tokenizer and the real Qwen3.5 chat template, and a random LoRA adapter
(r 16, alpha 32, the seed's modules) standing in for the SFT adapter the loop starts from and keeps as reference.
Usage: python demo_model.py CHAT_TEMPLATE OUT_DIR   (writes OUT_DIR/model and OUT_DIR/sft)
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "reference"))

from common import reference_torch  # noqa: E402
from train_fixture import write_adapter, write_model  # noqa: E402


def main():
    template, out = Path(sys.argv[1]), Path(sys.argv[2])
    reference_torch()
    write_model(out / "model", template)
    write_adapter(out / "model", out / "sft", seed=1)
    print(json.dumps({"model": str(out / "model"), "adapter": str(out / "sft")}))


if __name__ == "__main__":
    main()
