"""Goldens of the vision side of the native module (qwen35.md §7, §8, §10.1), computed by transformers 5.17 in fp32
with TF32 off; read by test/native-vision.test.ts.

  processor  transformers' Qwen2VLImageProcessor (torchvision backend) on PNGs chosen to walk every smart_resize
             branch: a resize with rounding (500x300 -> 512x288), an exact multiple left unresized (256x320), an
             image below min_pixels (100x80, upscaled), a tall odd-sized one (301x777), halves rounded to even
             (400x272 -> 384x256, half-up would give 416x288), the max_pixels branch (640x480 with max 200²), CLIP
             mean/std (non-trivial fused normalisation), a 33x1 strip; plus the two images of the model rows.
  model      tiny checkpoint "a" of tiny_model.py (vision depth 2, hidden 64, 4 heads, 8x8 position grid).
  rows       two rows: row 0 holds images (1,6,8) then (1,4,4), row 1 the same images in the other order, so the
             tower sees four frames of two lengths. Per image: the features after the merger in fp32, and the
             max |bf16 - fp32| of transformers' own bf16 tower (the budget for a bf16 tower). Per row:
             get_rope_index's [3, L] position ids and rope delta.

Layout of --out: images/<name>.png, model/ (checkpoint + preprocessor_config.json), vision.json (cases, rows),
vision.safetensors (processor.<name>.pixel_values, image.<name>.features, row.<r>.position_ids as int32).
Usage: python vision_golden.py --out DIR [--seed 0]
"""
import argparse
from pathlib import Path

import torch
from PIL import Image
from transformers import Qwen2VLImageProcessor, Qwen3_5ForConditionalGeneration

from common import reference_torch, save_tensors, write_json
from test_images import test_image
from tiny_model import PREPROCESSOR, build_tiny_model

QWEN = {"patchSize": 16, "temporalPatchSize": 2, "mergeSize": 2, "minPixels": 65536, "maxPixels": 16777216,
        "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]}
CLIP = {"mean": [0.48145466, 0.4578275, 0.40821073], "std": [0.26862954, 0.26130258, 0.27577711]}
MODEL_OPTIONS = dict(QWEN, minPixels=PREPROCESSOR["size"]["shortest_edge"])  # the tiny model's min_pixels (64²)

# name -> (width, height, options)
PROCESSOR_CASES = {
    "resize": (500, 300, QWEN),
    "exact": (256, 320, QWEN),
    "small": (100, 80, QWEN),
    "tall": (301, 777, QWEN),
    "half_even": (400, 272, QWEN),
    "max_pixels": (640, 480, dict(QWEN, minPixels=4096, maxPixels=200 * 200)),
    "clip": (500, 300, dict(QWEN, **CLIP)),
    "strip": (33, 1, QWEN),
    "img0": (120, 100, MODEL_OPTIONS),  # -> (1, 6, 8)
    "img1": (58, 70, MODEL_OPTIONS),  # -> (1, 4, 4)
}
ROW_IMAGES = [["img0", "img1"], ["img1", "img0"]]
SCORED = 2  # scored tokens at the end of each row (inspect needs a span; its values are not compared here)


def processor(options: dict) -> Qwen2VLImageProcessor:
    return Qwen2VLImageProcessor(
        patch_size=options["patchSize"], temporal_patch_size=options["temporalPatchSize"],
        merge_size=options["mergeSize"], min_pixels=options["minPixels"], max_pixels=options["maxPixels"],
        image_mean=options["mean"], image_std=options["std"])


def write_processor_cases(out: Path, gen: torch.Generator, tensors: dict) -> list:
    cases = []
    for name, (width, height, options) in PROCESSOR_CASES.items():
        png = out / "images" / f"{name}.png"
        png.parent.mkdir(parents=True, exist_ok=True)
        test_image(width, height, gen).save(png, format="PNG")
        result = processor(options)(images=[Image.open(png).convert("RGB")], return_tensors="pt")
        tensors[f"processor.{name}.pixel_values"] = result["pixel_values"].float()
        grid = [int(v) for v in result["image_grid_thw"][0]]
        cases.append({"name": name, "png": f"images/{name}.png", "width": width, "height": height,
                      "options": options, "grid": grid})
    return cases


def build_row(images: list, grids: dict, tokens: dict, gen: torch.Generator) -> list:
    """Random text ids around <|vision_start|> pads <|vision_end|> blocks; SCORED text tokens at the end."""
    text_limit = min(tokens["vision_start_token_id"], tokens["image_token_id"])
    ids = torch.randint(0, text_limit, (5,), generator=gen).tolist()
    for name in images:
        t, gh, gw = grids[name]
        ids += [tokens["vision_start_token_id"]] + [tokens["image_token_id"]] * (t * gh * gw // 4)
        ids += [tokens["vision_end_token_id"]] + torch.randint(0, text_limit, (7,), generator=gen).tolist()
    return ids + torch.randint(0, text_limit, (SCORED,), generator=gen).tolist()


@torch.no_grad()
def write_model_goldens(out: Path, cases: list, tensors: dict, gen: torch.Generator, seed: int) -> dict:
    build_tiny_model("a", seed, out / "model")
    model = Qwen3_5ForConditionalGeneration.from_pretrained(
        str(out / "model"), dtype=torch.float32, attn_implementation="eager").eval()
    tokens = {k: getattr(model.config, k) for k in ("vision_start_token_id", "vision_end_token_id", "image_token_id")}
    grids = {c["name"]: c["grid"] for c in cases}

    names = list(ROW_IMAGES[0])
    pixel_values = torch.cat([tensors[f"processor.{n}.pixel_values"] for n in names])
    grid_thw = torch.tensor([grids[n] for n in names])
    features = model.model.get_image_features(pixel_values, grid_thw).pooler_output
    visual_bf16 = model.model.visual.to(torch.bfloat16)
    features_bf16 = visual_bf16(pixel_values.to(torch.bfloat16), grid_thw=grid_thw).pooler_output.float()
    model.model.visual.float()
    bf16_error = float((features_bf16 - torch.cat(features)).abs().max())
    for name, f in zip(names, features):
        tensors[f"image.{name}.features"] = f

    rows = []
    for r, images in enumerate(ROW_IMAGES):
        ids = torch.tensor([build_row(images, grids, tokens, gen)])
        position_ids, delta = model.model.get_rope_index(
            ids, mm_token_type_ids=(ids == tokens["image_token_id"]).to(torch.int32),
            image_grid_thw=torch.tensor([grids[n] for n in images]))
        tensors[f"row.{r}.position_ids"] = position_ids[:, 0]
        length = ids.shape[1]
        rows.append({"inputIds": ids[0].tolist(), "images": images, "scoreStart": length - SCORED,
                     "scoreCount": SCORED, "ropeDelta": int(delta)})
    return {"imageTokenId": tokens["image_token_id"], "rows": rows, "bf16FeatureError": bf16_error,
            "maxAbsFeature": float(torch.cat(features).abs().max())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    reference_torch()
    gen = torch.Generator().manual_seed(args.seed)
    tensors = {}
    cases = write_processor_cases(args.out, gen, tensors)
    summary = write_model_goldens(args.out, cases, tensors, gen, args.seed)
    save_tensors(args.out / "vision.safetensors", tensors)
    write_json(args.out / "vision.json", {"processor": cases, "model": "model", **summary})


if __name__ == "__main__":
    main()
