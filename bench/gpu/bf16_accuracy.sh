#!/usr/bin/env bash
# GPU conformance at the real 9B shapes (issue 2): rlloop's bf16 log-probs against transformers' float32, with
# transformers' own bf16 error as the budget (qwen35.md §17), plus rlloop's float32 against transformers' float32.
# Runs on the GPU machine from the repository root; writes JSON results under $OUT (or ./.bench/out).
# Usage: bash bench/gpu/bf16_accuracy.sh [ROWS=16]
source bench/gpu/device-env.sh
OUT=${OUT:-.bench/out}; mkdir -p "$OUT"
ROWS=${1:-16}
MODEL=/tmp/rlloop-9b; DATA=/tmp/rlloop-rows
bash bench/gpu/ensure-addon.sh "$OUT/build.log"
[ -f "$MODEL/config.json" ] || python3 bench/gpu/make_9b.py "$MODEL"
# the row set is shared with kernel_check.sh, which may have written fewer rows: regenerate unless it has ROWS
[ -f "$DATA/rows.json" ] && [ "$(python3 -c "import json;print(len(json.load(open('$DATA/rows.json'))))")" -eq "$ROWS" ] ||
  python3 bench/gpu/make_rows.py "$DATA" --rows "$ROWS"
python3 bench/gpu/hf_logprobs.py "$MODEL" "$DATA" "$OUT/hf_fp32.json" --dtype float32
python3 bench/gpu/hf_logprobs.py "$MODEL" "$DATA" "$OUT/hf_bf16.json" --dtype bfloat16
node bench/gpu/native_logprobs.mjs "$MODEL" "$DATA" "$OUT/rlloop_bf16.json" --dtype bfloat16
node bench/gpu/native_logprobs.mjs "$MODEL" "$DATA" "$OUT/rlloop_fp32.json" --dtype float32
echo "== rlloop float32 vs transformers float32 (same maths, expect ~1e-4 or below)"
python3 bench/gpu/compare_logprobs.py "$OUT/hf_fp32.json" "$OUT/rlloop_fp32.json" "$OUT/rlloop_fp32.json" | head -12
echo "== bf16 against the float32 reference"
python3 bench/gpu/compare_logprobs.py "$OUT/hf_fp32.json" "$OUT/hf_bf16.json" "$OUT/rlloop_bf16.json"
