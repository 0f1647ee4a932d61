"""transformers' collation of training rows, the reference of src/train/collate.ts: for each row of a jsonl file,
apply_chat_template([image, prompt], add_generation_prompt, enable_thinking=False) + code + <|im_end|>, then the
Qwen3VLProcessor (AutoProcessor of the model folder) on that text and the row's image, one row at a time.
Outputs (safetensors, for the TypeScript test): ids.<i> [L] int32, pixels.<i> [gh*gw, 1536], grid.<i> [3]; and
texts.json (the rendered texts).
Usage: python collate_reference.py MODEL_DIR ROWS.jsonl PROMPT_TEMPLATE OUT_DIR
"""
import json
import sys
from pathlib import Path

import jinja2
from PIL import Image
from transformers import AutoProcessor

from common import reference_torch, save_tensors


def main():
    model, rows_path, template, out = (Path(a) for a in sys.argv[1:5])
    reference_torch()
    processor = AutoProcessor.from_pretrained(model)
    prompt = jinja2.Template(template.read_text(), keep_trailing_newline=True)
    tensors, texts = {}, []
    for i, line in enumerate(l for l in rows_path.read_text().splitlines() if l.strip()):
        row = json.loads(line)
        user = prompt.render(name=row["name"], memory=row.get("memory"))
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": user}]}]
        text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                             enable_thinking=False) + row["code"] + "<|im_end|>"
        inputs = processor(text=[text], images=[Image.open(row["image"]).convert("RGB")], return_tensors="pt")
        tensors[f"ids.{i}"] = inputs["input_ids"][0]
        tensors[f"pixels.{i}"] = inputs["pixel_values"]
        tensors[f"grid.{i}"] = inputs["image_grid_thw"][0]
        texts.append(text)
    save_tensors(out / "collate.safetensors", tensors)
    (out / "texts.json").write_text(json.dumps(texts))


if __name__ == "__main__":
    main()
