"""A Qwen3.5-shaped tokenizer for benchmarks, written into a model folder: byte-level BPE with the Qwen3.5
pre-tokenizer (qwen35.md §9.2) and a 256-symbol vocabulary (one token per byte, no merges), with every special
token at its real Qwen3.5 id, so the real chat template, the image-pad expansion and the model's token ids all
line up. The real 248k-entry tokenizer.json cannot be downloaded here; token counts per row are set by text
length instead (one token per ASCII character). Writes tokenizer.json, tokenizer_config.json (with the real chat
template) and chat_template.jinja.
Usage: python3 byte_tokenizer.py MODEL_DIR CHAT_TEMPLATE.jinja
"""
import json
import sys
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
           r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
            "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
            "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
            "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>",
            "</tool_response>", "<think>", "</think>"]
FIRST_SPECIAL = 248044


def build() -> dict:
    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    # Fillers up to the first special id: never produced (no merges), they only place the specials at their real ids.
    vocab.update({f"<unused_{i}>": i for i in range(len(vocab), FIRST_SPECIAL)})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    spec = json.loads(tok.to_str())
    spec["added_tokens"] = [{"id": FIRST_SPECIAL + i, "content": s, "single_word": False, "lstrip": False,
                             "rstrip": False, "normalized": False, "special": s not in ("<think>", "</think>",
                             "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")}
                            for i, s in enumerate(SPECIALS)]
    return spec


def main():
    out, template = Path(sys.argv[1]), Path(sys.argv[2]).read_text()
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(json.dumps(build()))
    (out / "chat_template.jinja").write_text(template)
    config = {"tokenizer_class": "Qwen2Tokenizer", "bos_token": None, "eos_token": "<|im_end|>",
              "pad_token": "<|endoftext|>", "model_max_length": 262144, "chat_template": template,
              "image_token": "<|image_pad|>", "video_token": "<|video_pad|>",
              "vision_bos_token": "<|vision_start|>", "vision_eos_token": "<|vision_end|>"}
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    check = Tokenizer.from_file(str(out / "tokenizer.json"))
    ids = check.encode("<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Hi 12<|im_end|>").ids
    assert ids[0] == 248045 and 248056 in ids, ids
    print(json.dumps({"tokenizer": str(out / "tokenizer.json"), "example_ids": ids}))


if __name__ == "__main__":
    main()
