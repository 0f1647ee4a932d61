#!/usr/bin/env bash
# The CUDA kernels of native/src/gdn_kernels.cu against the ATen formulation they replace, on the GPU machine at
# the real 9B shapes: log-probs and every LoRA gradient of one forward + backward, in float32 (4 rows) and
# bfloat16 (8 rows), each variant in its own process (RLLOOP_GDN_KERNELS=0|1), with the forward/backward times.
# Usage: bash bench/gpu/kernel_check.sh
source bench/gpu/device-env.sh
OUT=${OUT:-.bench/out}; mkdir -p "$OUT"
MODEL=/tmp/rlloop-9b; ROWS=/tmp/rlloop-rows; PPO=/tmp/rlloop-ppo-16
[ -f native/build/Release/rlloop_native.node ] || bash bench/gpu/device-build.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
[ -f "$MODEL/config.json" ] || python3 bench/gpu/make_9b.py "$MODEL" 2>&1 | grep -v Writing
[ -f "$MODEL/tokenizer.json" ] || python3 bench/gpu/byte_tokenizer.py "$MODEL" config/qwen3.5-chat-template.jinja >/dev/null
[ -f "$ROWS/rows.json" ] || python3 bench/gpu/make_rows.py "$ROWS" --rows 8
[ -f "$PPO/ppo.jsonl" ] || (cd bench/gpu && python3 make_ppo_data.py "$MODEL" "$PPO" --rows 16)
for spec in "bfloat16 8" "float32 4"; do
  set -- $spec
  for k in 0 1; do
    RLLOOP_GDN_KERNELS=$k node bench/gpu/kernel_check.mjs "$MODEL" "$ROWS" "$PPO/adapter" "/tmp/kc-$1-$k" --dtype "$1" --rows "$2"
  done
  echo "== $1: ATen vs CUDA kernels"
  python3 bench/gpu/compare_kernels.py "/tmp/kc-$1-0" "/tmp/kc-$1-1" | tee "$OUT/kernels-$1.json"
done
