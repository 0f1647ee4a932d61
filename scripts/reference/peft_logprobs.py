"""Log-probs that PEFT gives with an adapter it did not write (the native module's saveAdapter output): the check
that an adapter saved by the module loads in PEFT/vLLM and means the same thing there.

PeftModel.from_pretrained on the tiny checkpoint (fp32, eager, TF32 off), then the scored-token log-probs of each
row of the given batch JSON (forward_golden's format; image paths relative to --root), one unpadded row at a time.
Output: --out/logp.safetensors with logp.row.<r> [K], and --out/adapter.json with the adapter keys PEFT loaded.
Usage: python peft_logprobs.py --model DIR --adapter DIR --batch BATCH.json --root DIR --out DIR
"""
import argparse
from pathlib import Path

import torch
from peft import PeftModel

from batch import load_processor, rows_from_json
from common import read_json, reference_torch, save_tensors, write_json
from forward_golden import load_reference_model
from lora_golden import batch_logp, peft_key


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--adapter", type=Path, required=True)
    ap.add_argument("--batch", type=Path, required=True)
    ap.add_argument("--root", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    reference_torch()
    model = load_reference_model(args.model)
    peft_model = PeftModel.from_pretrained(model, str(args.adapter)).eval()
    rows, images = rows_from_json(read_json(args.batch)["rows"], load_processor(args.model), args.root)
    with torch.no_grad():
        lp = batch_logp(peft_model, rows, images, model.config.image_token_id)
    save_tensors(args.out / "logp.safetensors", {f"logp.row.{i}": row for i, row in enumerate(lp)})
    loaded = sorted(peft_key(n) for n, _ in peft_model.named_parameters() if "lora_" in n)
    write_json(args.out / "adapter.json", {"keys": loaded, "config": read_json(args.adapter / "adapter_config.json")})


if __name__ == "__main__":
    main()
