"""Writes a small Qwen3.5-shaped tokenizer for the tiny test model (vocab_size 1024): byte-level BPE trained to
991 tokens on a generated corpus, then the 33 Qwen3.5 special tokens at 991..1023 in their real relative order
(<|endoftext|> 991, <|im_start|> 992, <|im_end|> 993, <|vision_start|> 1000, <|vision_end|> 1001,
<|image_pad|> 1003, <|video_pad|> 1004, <think> 1015, </think> 1016). Normaliser, pre-tokenizer and decoder are
the real ones (qwen_tokenizer_parts.py). The tiny model's config.json must point its token ids at these.
Usage: python make_tokenizer.py CHAT_TEMPLATE OUT_DIR  (prints the special ids as JSON)
"""
import json
import random
import sys
from pathlib import Path

from tokenizers import Tokenizer, pre_tokenizers
from tokenizers.models import BPE
from tokenizers.trainers import BpeTrainer

from qwen_tokenizer_parts import finish, write_model_files

BPE_SIZE = 991  # 1024 - 33 special tokens
WORDS = ("user assistant system think find the a an of to and is in on at with target object robot camera frame "
         "memory code behaviour behavior tree digit policy look move turn left right forward back stop near far "
         "red green blue yellow cup ball box chair door table person bottle plant screen window floor wall you "
         "what where which when describe image picture this that there here it its write answer one two three "
         "four five six seven eight nine zero seen not yet before after search approach grasp hold drop").split()


def corpus(lines: int, seed: int = 0) -> list[str]:
    """Deterministic sentences over WORDS with punctuation, digits and newlines, so BPE has pairs to merge."""
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 14))]
        words[0] = words[0].capitalize()
        out.append(" ".join(words) + rng.choice([".", "?", "!", ":", ","]) + " " + str(rng.randint(0, 99999)))
    return out


def main():
    template, out = Path(sys.argv[1]), Path(sys.argv[2])
    tokenizer = Tokenizer(BPE(fuse_unk=False, byte_fallback=False))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = BpeTrainer(vocab_size=BPE_SIZE, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                         show_progress=False)
    tokenizer.train_from_iterator(corpus(4000), trainer=trainer)
    assert tokenizer.get_vocab_size() == BPE_SIZE, f"trained {tokenizer.get_vocab_size()} tokens, need {BPE_SIZE}"
    ids = write_model_files(finish(tokenizer), out, template.read_text())
    assert ids["<|image_pad|>"] == 1003 and ids["</think>"] == 1016
    print(json.dumps(ids))


if __name__ == "__main__":
    main()
