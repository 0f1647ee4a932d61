#!/usr/bin/env bash
# On the GPU machine: one rlloop PPO round of ROWS rows in float32 and in bfloat16 from the same adapter and rows
# (make_ppo_data.py's, as ppo_bench.sh), each VARIANT a bfloat16 run under that RLLOOP_KERNELS value (1: every
# CUDA kernel; -delta_rule: the ATen delta rule), then update_cosine.py: how close each bfloat16 round's LoRA
# update is to the float32 round's (cosine, relative L2).
# Usage: bash bench/gpu/update_cosine.sh [ROWS=32] ["1 -delta_rule"]   (a variant given n times: n runs)
source bench/gpu/device-env.sh
OUT=${OUT:-.bench/out}; mkdir -p "$OUT"
ROWS=${1:-32}; VARIANTS=${2:-"1"}
MODEL=/tmp/rlloop-9b; DATA=/tmp/rlloop-ppo-$ROWS; TRAINED=/tmp/rlloop-cosine
bash bench/gpu/ensure-addon.sh /tmp/rlloop-build.log
[ -f "$MODEL/config.json" ] || python3 bench/gpu/make_9b.py "$MODEL" 2>&1 | grep -v Writing
[ -f "$MODEL/tokenizer.json" ] || python3 bench/gpu/byte_tokenizer.py "$MODEL" config/qwen3.5-chat-template.jinja >/dev/null
[ -f "$DATA/ppo.jsonl" ] || (cd bench/gpu && python3 make_ppo_data.py "$MODEL" "$DATA" --rows "$ROWS")
round() {  # round NAME DTYPE KERNELS
  rm -rf "${TRAINED:?}/$1"
  RLLOOP_KERNELS=$3 timeout "${RUN_TIMEOUT:-400}" node bin/rlloop.js train ppo --data "$DATA/ppo.jsonl" --adapter "$DATA/adapter" \
    --ref "$DATA/adapter" --model "$MODEL" --prompt bench/gpu/prompt.jinja --device cuda --gpus 1 --dtype "$2" \
    --out "$TRAINED/$1" > "$OUT/cosine-$1.log" 2>&1 || { tail -20 "$OUT/cosine-$1.log"; return 1; }
  grep -E '"msg":"ppo done"' "$OUT/cosine-$1.log" | cut -c1-300
}
round float32 float32 1 || exit 1
others=()
i=0  # a variant given twice is run twice (bf16 training is not bitwise repeatable: atomics in the backward)
for k in $VARIANTS; do i=$((i + 1)); round "bfloat16$k-$i" bfloat16 "$k" && others+=("$TRAINED/bfloat16$k-$i"); done
python3 bench/gpu/update_cosine.py "$DATA/adapter" "$TRAINED/float32" "${others[@]}" | tee "$OUT/update-cosine.json"
