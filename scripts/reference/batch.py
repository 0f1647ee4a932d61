"""Rows and batches of the conformance tests, in the shape the native module takes them (native-api.md, "Rows and
batches"): the whole token row with every <|image_pad|> already expanded (gh*gw/4 per image), its images in order,
and the scored span [scoreStart, scoreStart + K) at the end of the row (K = code length + 1, as the seed scores the
code digits and <|im_end|>). Text tokens are random ids below the vision special tokens: the model is random, so
no tokenizer is involved. This file builds rows from a spec, (de)serialises them as the JSON the TypeScript tests
read, and turns a row into transformers' forward arguments."""
from dataclasses import dataclass, field
from pathlib import Path

import torch
from PIL import Image
from transformers import Qwen2VLImageProcessor

CODE_LENGTH = 4  # digits per behavior code in the seed; K = CODE_LENGTH + 1 scored tokens

# A row is text runs and images; the scored tokens follow the last run.
BATCHES = {
    # One row of 179 tokens (the 64-token GDN chunks of transformers are crossed twice) with two images of
    # different non-square grids.
    "long": [[("text", 24), ("image", "img0"), ("text", 60), ("image", "img1"), ("text", 70)]],
    # Three rows of different lengths (43, 85 and 30 tokens), one image each: right padding is exercised.
    "rows": [
        [("text", 10), ("image", "img2"), ("text", 20)],
        [("text", 30), ("image", "img3"), ("text", 40)],
        [("text", 5), ("image", "img4"), ("text", 3)],
    ],
}


@dataclass
class Row:
    input_ids: list  # int, image pads expanded
    images: list  # image names (keys of the image table), in order
    score_start: int
    score_count: int
    targets_fixed: list = field(default_factory=list)  # scored positions whose target is already chosen


@dataclass
class ImageInput:
    name: str
    png: str  # relative to the fixture root
    pixel_values: torch.Tensor  # [gh*gw, 3*2*16*16]
    grid: list  # [1, gh, gw]

    @property
    def tokens(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2] // 4


def load_processor(model_dir: Path) -> Qwen2VLImageProcessor:
    """transformers' default Qwen2-VL processor (torchvision backend, qwen35.md §8) from the model's config."""
    return Qwen2VLImageProcessor.from_pretrained(str(model_dir))


def preprocess(processor: Qwen2VLImageProcessor, root: Path, name: str, png: str) -> ImageInput:
    image = Image.open(root / png).convert("RGB")
    out = processor(images=[image], return_tensors="pt")
    grid = [int(v) for v in out["image_grid_thw"][0]]
    return ImageInput(name=name, png=png, pixel_values=out["pixel_values"].float(), grid=grid)


def build_rows(spec: list, images: dict, tokens: dict, gen: torch.Generator) -> list:
    """Rows of random text ids and expanded image blocks, with CODE_LENGTH + 1 scored slots left at the end
    (filled with targets by forward_golden)."""
    text_limit = min(tokens["vision_start_token_id"], tokens["image_token_id"])
    rows = []
    for segments in spec:
        ids, names = [], []
        for kind, value in segments:
            if kind == "text":
                ids += torch.randint(0, text_limit, (value,), generator=gen).tolist()
            else:
                ids += [tokens["vision_start_token_id"]]
                ids += [tokens["image_token_id"]] * images[value].tokens
                ids += [tokens["vision_end_token_id"]]
                names.append(value)
        k = CODE_LENGTH + 1
        rows.append(Row(input_ids=ids + [0] * k, images=names, score_start=len(ids), score_count=k))
    return rows


def model_inputs(ids: list, images: list, image_token_id: int) -> dict:
    """transformers' forward arguments for one unpadded row (batch of 1)."""
    input_ids = torch.tensor([ids], dtype=torch.long)
    inputs = {"input_ids": input_ids, "mm_token_type_ids": (input_ids == image_token_id).to(torch.int32)}
    if images:
        inputs["pixel_values"] = torch.cat([im.pixel_values for im in images])
        inputs["image_grid_thw"] = torch.tensor([im.grid for im in images], dtype=torch.long)
    return inputs


def padded_inputs(rows: list, images: dict, image_token_id: int, pad_id: int = 0) -> dict:
    """transformers' forward arguments for a right-padded batch with an attention mask."""
    width = max(len(r.input_ids) for r in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        input_ids[i, : len(r.input_ids)] = torch.tensor(r.input_ids)
        mask[i, : len(r.input_ids)] = 1
    used = [images[n] for r in rows for n in r.images]
    return {
        "input_ids": input_ids,
        "attention_mask": mask,
        "mm_token_type_ids": (input_ids == image_token_id).to(torch.int32),
        "pixel_values": torch.cat([im.pixel_values for im in used]),
        "image_grid_thw": torch.tensor([im.grid for im in used], dtype=torch.long),
    }


def rows_to_json(rows: list, images: dict) -> list:
    return [{
        "inputIds": r.input_ids,
        "images": [{"name": n, "png": images[n].png, "grid": images[n].grid} for n in r.images],
        "scoreStart": r.score_start,
        "scoreCount": r.score_count,
    } for r in rows]


def rows_from_json(entries: list, processor: Qwen2VLImageProcessor, root: Path) -> tuple:
    """Inverse of rows_to_json: rows plus the image table, pixel values recomputed by transformers' processor."""
    images, rows = {}, []
    for e in entries:
        for im in e["images"]:
            if im["name"] not in images:
                images[im["name"]] = preprocess(processor, root, im["name"], im["png"])
        rows.append(Row(input_ids=list(e["inputIds"]), images=[im["name"] for im in e["images"]],
                        score_start=e["scoreStart"], score_count=e["scoreCount"]))
    return rows, images
