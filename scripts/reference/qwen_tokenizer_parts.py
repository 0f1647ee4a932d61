"""The parts every Qwen3.5 tokenizer shares (qwen35.md §9.2), for the two fixture generators beside this file.

make_qwen_tokenizer.py fills them with the real 248,044-token vocabulary; make_tokenizer.py with a small trained one
for the tiny test model. Both write a tokenizer.json whose normaliser, pre-tokenizer, decoder and special tokens are
the real ones, so the collation code meets the same structure the Qwen3.5-9B checkpoint has.
"""
import json
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers

# The Qwen3.5 pre-tokenizer regex; the lone \p{N} makes every digit its own token.
PRETOKENIZE_REGEX = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"""
                     r"""| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

# The 33 added tokens in the order of their real ids 248044..248076.
SPECIAL_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>",
    "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>",
    "<think>", "</think>", "<|audio_start|>", "<|audio_end|>", "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>",
    "<tts_text_bos_single>", "<|audio_pad|>",
]


def finish(tokenizer: Tokenizer) -> Tokenizer:
    """Adds the Qwen3.5 normaliser, pre-tokenizer, decoder and the special tokens (ids follow the BPE vocab)."""
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    base = tokenizer.get_vocab_size(with_added_tokens=False)
    tokenizer.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in SPECIAL_TOKENS])
    assert tokenizer.token_to_id(SPECIAL_TOKENS[0]) == base, "special tokens must follow the BPE vocab"
    return tokenizer


def write_model_files(tokenizer: Tokenizer, out: Path, chat_template: str) -> dict:
    """tokenizer.json, chat_template.jinja, tokenizer_config.json (with the chat template too),
    preprocessor_config.json (Qwen3.5's image processor settings, qwen35.md §8) and video_preprocessor_config.json.
    Returns the special ids."""
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out / "tokenizer.json"))
    # transformers' processor reads its template from chat_template.jinja, the tokenizer from tokenizer_config.json.
    (out / "chat_template.jinja").write_text(chat_template)
    ids = {t: tokenizer.token_to_id(t) for t in SPECIAL_TOKENS}
    added = {str(ids[t]): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                           "single_word": False, "special": True} for t in SPECIAL_TOKENS}
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "Qwen3_5Tokenizer", "added_tokens_decoder": added, "bos_token": None,
        "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None,
        "model_max_length": 262144, "clean_up_tokenization_spaces": False, "split_special_tokens": False,
        "chat_template": chat_template, "processor_class": "Qwen3VLProcessor"}, indent=2))
    (out / "preprocessor_config.json").write_text(json.dumps({
        "size": {"shortest_edge": 65536, "longest_edge": 16777216}, "patch_size": 16, "temporal_patch_size": 2,
        "merge_size": 2, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
        "processor_class": "Qwen3VLProcessor", "image_processor_type": "Qwen2VLImageProcessorFast"}, indent=2))
    # Checkpoints ship one; without it (and without a config.json) AutoProcessor cannot build Qwen3VLProcessor.
    (out / "video_preprocessor_config.json").write_text(json.dumps({
        "video_processor_type": "Qwen3VLVideoProcessor", "processor_class": "Qwen3VLProcessor", "patch_size": 16,
        "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]},
        indent=2))
    return ids
