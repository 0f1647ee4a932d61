"""Deterministic RGB PNGs for the conformance batches. Sizes are chosen so that Qwen's smart_resize (min_pixels
64², factor 32; qwen35.md §8) exercises each branch and gives non-square grids of both orientations:
  img0 120x100 -> 128x96 (rounds 3.75 up, 3.125 down)      grid (1, 6, 8), 12 image tokens
  img1  58x70  ->  64x64                                   grid (1, 4, 4),  4 image tokens
  img2  50x40  ->  96x64 (below min_pixels: upscaled)      grid (1, 4, 6),  6 image tokens
  img3 112x80  -> 128x64 (3.5 -> 4 and 2.5 -> 2: half to even)  grid (1, 4, 8),  8 image tokens
  img4  90x150 ->  96x160 (portrait)                        grid (1, 10, 6), 15 image tokens
(width x height). Content: smooth colour fields plus edges plus noise, so an antialiasing or rounding error in the
bicubic resize shows in the pixel values."""
from pathlib import Path

import torch
import torch.nn.functional as F
from PIL import Image

IMAGE_SIZES = {"img0": (120, 100), "img1": (58, 70), "img2": (50, 40), "img3": (112, 80), "img4": (90, 150)}


def test_image(width: int, height: int, gen: torch.Generator) -> Image.Image:
    coarse = torch.rand((1, 3, 4, 5), generator=gen)
    smooth = F.interpolate(coarse, size=(height, width), mode="bilinear", align_corners=False)[0]
    ys = torch.arange(height)[:, None].expand(height, width)
    xs = torch.arange(width)[None, :].expand(height, width)
    stripes = ((xs // 7 + ys // 5) % 2).float() * 0.35  # hard edges: the resize kernel's antialiasing shows here
    noise = torch.rand((3, height, width), generator=gen) * 0.25
    rgb = (smooth * 0.6 + stripes + noise).clamp(0, 1) * 255
    array = rgb.round().to(torch.uint8).permute(1, 2, 0).contiguous().numpy()
    return Image.fromarray(array, mode="RGB")


def write_test_images(out: Path, seed: int = 0) -> dict:
    """Writes out/<name>.png for every entry of IMAGE_SIZES; returns name -> path."""
    out.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    paths = {}
    for name, (width, height) in IMAGE_SIZES.items():
        path = out / f"{name}.png"
        test_image(width, height, gen).save(path, format="PNG")
        paths[name] = path
    return paths
