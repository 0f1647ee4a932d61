"""Forward-pass goldens of a tiny Qwen3.5 checkpoint, computed by transformers (Qwen3_5ForConditionalGeneration,
eager attention, fp32, TF32 off) one unpadded row at a time, which is what a right-padded batch must reproduce.

For every row of a batch it writes: the position ids of get_rope_index [3, L] and rope delta; the hidden states of
output_hidden_states (num_layers + 1 entries [L, hidden]: embeddings, after each layer, the last after the final
norm); the logits at the scored positions [K, vocab] and the log-probs of the scored tokens [K]. For every image:
transformers' processor pixel values [gh*gw, 1536] and the vision features after the merger [gh*gw/4, hidden].
It also runs the same rows as one right-padded batch with an attention mask and records how far transformers'
own padded path is from the per-row one (informational, in the JSON).

Targets: the scored tokens at even j are the model's own argmax (restricted to non-vision tokens), at odd j random,
so `correct` (argmax == target) is both true and false within a row.

Outputs (under --out): <batch>.json (rows, images, targets, correct, top-2 margins) and <batch>.safetensors:
  image.<name>.pixel_values, image.<name>.features, row.<r>.position_ids (int32), row.<r>.hidden.<l>,
  row.<r>.logits, row.<r>.logp
Usage: python forward_golden.py --model DIR --out DIR [--seed N]   (writes the batches of batch.BATCHES; the model
       folder's parent must hold images/ with test_images.py's PNGs)
"""
import argparse
from pathlib import Path

import torch
from transformers import Qwen3_5ForConditionalGeneration

from batch import BATCHES, build_rows, load_processor, model_inputs, padded_inputs, preprocess, rows_to_json
from common import reference_torch, save_tensors, write_json

VISION_TOKEN_KEYS = ("vision_start_token_id", "vision_end_token_id", "image_token_id", "video_token_id")


def load_reference_model(model_dir: Path) -> Qwen3_5ForConditionalGeneration:
    """The checkpoint as transformers reads it (bf16 tensors upcast), computing in fp32 with eager attention."""
    model = Qwen3_5ForConditionalGeneration.from_pretrained(
        str(model_dir), dtype=torch.float32, attn_implementation="eager")
    return model.eval()


def token_ids(model) -> dict:
    return {k: getattr(model.config, k) for k in VISION_TOKEN_KEYS}


def row_images(row, images: dict) -> list:
    return [images[n] for n in row.images]


@torch.no_grad()
def choose_targets(model, rows: list, images: dict, gen: torch.Generator) -> None:
    """Fills each row's scored slots one at a time (the logits at a slot depend only on earlier tokens)."""
    tokens = token_ids(model)
    text_limit = min(tokens["vision_start_token_id"], tokens["image_token_id"])
    banned = list(tokens.values())
    for row in rows:
        for j in range(row.score_count):
            pos = row.score_start + j
            inputs = model_inputs(row.input_ids[:pos], row_images(row, images), tokens["image_token_id"])
            logits = model(**inputs, use_cache=False).logits[0, -1].clone()
            logits[banned] = -float("inf")
            pick = int(logits.argmax()) if j % 2 == 0 else int(torch.randint(0, text_limit, (1,), generator=gen))
            row.input_ids[pos] = pick


@torch.no_grad()
def row_golden(model, row, images: dict, r: int, tensors: dict) -> dict:
    tokens = token_ids(model)
    inputs = model_inputs(row.input_ids, row_images(row, images), tokens["image_token_id"])
    out = model(**inputs, output_hidden_states=True, use_cache=False)
    n_layers = model.config.text_config.num_hidden_layers
    assert len(out.hidden_states) == n_layers + 1, f"expected {n_layers + 1} hidden states"
    for layer, h in enumerate(out.hidden_states):
        tensors[f"row.{r}.hidden.{layer}"] = h[0]
    s, k = row.score_start, row.score_count
    logits = out.logits[0, s - 1: s + k - 1]
    targets = torch.tensor(row.input_ids[s: s + k])
    logp = logits.log_softmax(-1).gather(-1, targets[:, None])[:, 0]
    top2 = logits.topk(2, dim=-1).values
    tensors[f"row.{r}.logits"] = logits
    tensors[f"row.{r}.logp"] = logp
    grids = inputs.get("image_grid_thw")
    position_ids, delta = model.model.get_rope_index(
        inputs["input_ids"], inputs["mm_token_type_ids"], image_grid_thw=grids)
    tensors[f"row.{r}.position_ids"] = position_ids[:, 0]
    if grids is not None:
        features = model.model.get_image_features(inputs["pixel_values"], grids).pooler_output
        for name, f in zip(row.images, features):
            tensors[f"image.{name}.features"] = f
            tensors[f"image.{name}.pixel_values"] = images[name].pixel_values
    return {
        "targets": targets.tolist(),
        "correct": (logits.argmax(-1) == targets).tolist(),
        "margin": (top2[:, 0] - top2[:, 1]).tolist(),
        "ropeDelta": int(delta.reshape(-1)[0]),
        "maxAbsHidden": max(float(h.abs().max()) for h in out.hidden_states),
    }


@torch.no_grad()
def padded_vs_rows(model, rows: list, images: dict, tensors: dict) -> dict:
    """Max abs difference of transformers' right-padded batch from its per-row results (valid positions only)."""
    out = model(**padded_inputs(rows, images, token_ids(model)["image_token_id"]),
                output_hidden_states=True, use_cache=False)
    hidden, logits = 0.0, 0.0
    for r, row in enumerate(rows):
        n, s, k = len(row.input_ids), row.score_start, row.score_count
        for layer, h in enumerate(out.hidden_states):
            hidden = max(hidden, float((h[r, :n] - tensors[f"row.{r}.hidden.{layer}"]).abs().max()))
        logits = max(logits, float((out.logits[r, s - 1: s + k - 1] - tensors[f"row.{r}.logits"]).abs().max()))
    return {"hidden": hidden, "logits": logits}


def write_batch_golden(model, model_dir: Path, batch: str, root: Path, out: Path, seed: int) -> dict:
    """Builds the batch's rows, picks targets, computes and writes the goldens; returns the batch JSON."""
    processor = load_processor(model_dir)
    names = sorted({name for segments in BATCHES[batch] for kind, name in segments if kind == "image"})
    images = {n: preprocess(processor, root, n, f"images/{n}.png") for n in names}
    gen = torch.Generator().manual_seed(seed)
    rows = build_rows(BATCHES[batch], images, token_ids(model), gen)
    choose_targets(model, rows, images, gen)
    tensors = {}
    details = [row_golden(model, row, images, r, tensors) for r, row in enumerate(rows)]
    entries = rows_to_json(rows, images)
    for entry, detail in zip(entries, details):
        entry.update(detail)
    golden = {
        "batch": batch,
        "rows": entries,
        "numLayers": model.config.text_config.num_hidden_layers,
        "hfPaddedVsRowsMaxAbs": padded_vs_rows(model, rows, images, tensors) if len(rows) > 1 else None,
    }
    save_tensors(out / f"{batch}.safetensors", tensors)
    write_json(out / f"{batch}.json", golden)
    return golden


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    reference_torch()
    model = load_reference_model(args.model)
    for i, batch in enumerate(BATCHES):
        write_batch_golden(model, args.model, batch, args.model.parent, args.out, args.seed + i)


if __name__ == "__main__":
    main()
