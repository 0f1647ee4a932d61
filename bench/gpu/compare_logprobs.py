"""Compares bf16 log-probs against the float32 reference: prints max / mean absolute error of each candidate
(transformers' own bf16 and rlloop's native bf16) and the ratio rlloop / transformers. The acceptance rule
(issue 2, qwen35.md §17): rlloop's bf16 error must be within the error transformers' own bf16 shows.
Usage: python3 compare_logprobs.py REF_FP32.json HF_BF16.json NATIVE_BF16.json
"""
import json
import sys

import numpy as np


def errors(ref, cand):
    d = np.abs(np.array(cand, dtype=np.float64) - np.array(ref, dtype=np.float64))
    return {"max_abs": float(d.max()), "mean_abs": float(d.mean())}


def main():
    ref, hf, native = (json.load(open(p)) for p in sys.argv[1:4])
    e_hf, e_native = errors(ref["logp"], hf["logp"]), errors(ref["logp"], native["logp"])
    report = {"rows": len(ref["logp"]), "transformers_bf16": e_hf, "rlloop_bf16": e_native,
              "ratio_mean": e_native["mean_abs"] / e_hf["mean_abs"], "ratio_max": e_native["max_abs"] / e_hf["max_abs"],
              "peak_gib": {"transformers_fp32": ref.get("peak_gib"), "transformers_bf16": hf.get("peak_gib"),
                           "rlloop_bf16": native.get("peak_gib")}}
    print(json.dumps(report, indent=1))
    ok = e_native["mean_abs"] <= e_hf["mean_abs"] and e_native["max_abs"] <= e_hf["max_abs"]
    print("PASS" if ok else "FAIL", "rlloop bf16 error within transformers' own bf16 error")


if __name__ == "__main__":
    main()
