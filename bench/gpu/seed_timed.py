"""Runs the seed trainer (`bt_train.py`, unmodified file, copied into SEED_TREE/train/) under torchrun and reports
where its time goes: model load, then everything after it (adapters, old/ref log-probs, training, saving).
The one change is made here, not in the file: `use_kernels=True` is turned off, because transformers' hub kernels
are downloaded at run time and the GPU machine has no network (flash-linear-attention, when installed, is still
used by transformers' Qwen3.5 code path on its own).
Usage: torchrun --nproc_per_node=1 seed_timed.py SEED_TREE ppo|sft [seed flags...]
"""
import json
import sys
import time
from pathlib import Path

tree = Path(sys.argv[1]).resolve()
sys.argv = [str(tree / "train" / "bt_train.py")] + sys.argv[2:]
sys.path.insert(0, str(tree / "train"))

import transformers  # noqa: E402

import bt_train  # noqa: E402

marks = {"start": time.monotonic()}
original_from_pretrained = transformers.Qwen3_5ForConditionalGeneration.from_pretrained.__func__


def from_pretrained(cls, *args, **kwargs):
    kwargs["use_kernels"] = False
    model = original_from_pretrained(cls, *args, **kwargs)
    marks["loaded"] = time.monotonic()
    return model


bt_train.Qwen3_5ForConditionalGeneration.from_pretrained = classmethod(from_pretrained)
bt_train.main()
import torch  # noqa: E402

torch.cuda.synchronize()
end = time.monotonic()
print("SEED_TIMING " + json.dumps({"load_s": round(marks["loaded"] - marks["start"], 2),
                                   "after_load_s": round(end - marks["loaded"], 2),
                                   "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)}), flush=True)
