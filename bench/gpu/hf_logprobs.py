"""Reference log-probs of the scored tokens from transformers (the model's own code, torch fallbacks) for the rows
of make_rows.py, in float32 (TF32 off) or bfloat16 (autocast, as the seed trainer runs). Rows are run one at a
time (no padding). Writes OUT.json: {dtype, logp: [[...] per row], peak_gib, seconds}.
Usage: python3 hf_logprobs.py MODEL_DIR ROWS_DIR OUT.json --dtype float32|bfloat16
"""
import argparse
import json
import time
from pathlib import Path

import torch
from PIL import Image
from transformers import AutoImageProcessor, Qwen3_5ForConditionalGeneration


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", type=Path)
    ap.add_argument("rows", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], required=True)
    ap.add_argument("--limit", type=int, default=0)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dtype = getattr(torch, args.dtype)
    rows = json.loads((args.rows / "rows.json").read_text())
    rows = rows[: args.limit] if args.limit else rows
    processor = AutoImageProcessor.from_pretrained(args.model)
    model = Qwen3_5ForConditionalGeneration.from_pretrained(args.model, dtype=dtype, device_map={"": 0},
                                                            attn_implementation="sdpa").eval()
    torch.cuda.reset_peak_memory_stats()
    start = time.monotonic()
    out = []
    with torch.no_grad():
        for r in rows:
            image = processor(images=[Image.open(r["image"]).convert("RGB")], return_tensors="pt")
            ids = torch.tensor([r["inputIds"]], device="cuda")
            s, k = r["scoreStart"], r["scoreCount"]
            logits = model(input_ids=ids, attention_mask=torch.ones_like(ids),
                           mm_token_type_ids=(ids == model.config.image_token_id).long(),
                           pixel_values=image["pixel_values"].to("cuda"),
                           image_grid_thw=image["image_grid_thw"].to("cuda"), use_cache=False).logits
            lp = logits[0, s - 1:s - 1 + k].float().log_softmax(-1)
            out.append(lp.gather(-1, ids[0, s:s + k, None])[:, 0].tolist())
    torch.cuda.synchronize()
    result = {"dtype": args.dtype, "logp": out, "peak_gib": torch.cuda.max_memory_allocated() / 2**30,
              "seconds": time.monotonic() - start}
    args.out.write_text(json.dumps(result))
    print(json.dumps({k: v for k, v in result.items() if k != "logp"}))


if __name__ == "__main__":
    main()
