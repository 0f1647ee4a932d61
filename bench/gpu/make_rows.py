"""Synthetic decision rows at the benchmark's real sizes: a 640x480 camera frame (300 image tokens after
smart_resize) and a ~95-token prompt, chat-template framing ids of Qwen3.5 (qwen35.md §9), a 6-digit code.
No tokenizer is needed: ids are drawn directly. Writes DIR/frames/*.png (+ raw .rgb) and DIR/rows.json
([{image, width, height, inputIds, scoreStart, scoreCount}]).
Usage: python3 make_rows.py DIR --rows 256 [--prompt 95] [--code 6] [--seed 0]
"""
import argparse
import json
from pathlib import Path

import numpy as np
from PIL import Image

IM_START, IM_END, NL, USER, ASSISTANT = 248045, 248046, 198, 846, 74455
VISION_START, VISION_END, IMAGE_PAD = 248053, 248054, 248056
THINK, THINK_END, NLNL = 248068, 248069, 271
DIGIT0 = 15  # the id of "0"; digits are consecutive in Qwen's byte-level BPE


def frame(rng, w, h):
    """A smooth scene with a few coloured blobs and sensor noise: not compressible to nothing, like a camera."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack([x / w * 255, y / h * 255, (x + y) / (w + h) * 255], -1)
    for _ in range(4):
        cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(20, 120)
        img[(x - cx) ** 2 + (y - cy) ** 2 < r * r] = rng.uniform(0, 255, 3)
    img += rng.normal(0, 6, img.shape)
    return Image.fromarray(img.clip(0, 255).astype(np.uint8))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", type=Path)
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--prompt", type=int, default=95)
    ap.add_argument("--code", type=int, default=6)
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    (args.dir / "frames").mkdir(parents=True, exist_ok=True)
    image_tokens = (round(args.height / 32) * 32 // 16) * (round(args.width / 32) * 32 // 16) // 4
    rows = []
    for i in range(args.rows):
        path = args.dir / "frames" / f"{i:05d}.png"
        image = frame(rng, args.width, args.height)
        image.save(path)
        # Raw RGB beside the PNG: the GPU machine has no sharp; the native side reads these bytes directly.
        path.with_suffix(".rgb").write_bytes(image.tobytes())
        prompt = rng.integers(1000, 240000, args.prompt - int(rng.integers(0, 8))).tolist()
        code = (DIGIT0 + rng.integers(0, 10, args.code)).tolist()
        ids = ([IM_START, USER, NL, VISION_START] + [IMAGE_PAD] * image_tokens + [VISION_END] + prompt
               + [IM_END, NL, IM_START, ASSISTANT, NL, THINK, NLNL, THINK_END, NLNL] + code + [IM_END])
        rows.append({"image": str(path.resolve()), "width": args.width, "height": args.height, "inputIds": ids, "scoreStart": len(ids) - args.code - 1,
                     "scoreCount": args.code + 1})
    (args.dir / "rows.json").write_text(json.dumps(rows))
    print(json.dumps({"rows": len(rows), "tokens_mean": float(np.mean([len(r["inputIds"]) for r in rows]))}))


if __name__ == "__main__":
    main()
