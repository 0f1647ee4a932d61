#!/usr/bin/env bash
# The project's CUDA kernels (native/src/kernels/*.cu, native/src/delta_rule/fused_cuda.cu) against the ATen
# formulations they replace, on the GPU machine at the real 9B shapes: log-probs and every LoRA gradient of one
# forward + backward (kernel_check.mjs), each variant in its own process, with its forward/backward milliseconds
# and activation memory. Variants are dtype:rows:kernels:tf32[:backward] (kernels = RLLOOP_KERNELS: 0, 1 or e.g.
# -qkv_heads; tf32 = the model's tf32 option: 0 off, 1 on, or auto; RLLOOP_GDN_BACKWARD: manual = the hand-derived
# delta-rule backward, the default; autograd); the first is the
# reference the others are compared with (compare_kernels.py).
# Usage: bash bench/gpu/kernel_check.sh ["float32:4:0:0 float32:4:1:0 bfloat16:4:1:0 bfloat16:4:1:1"]
source bench/gpu/device-env.sh
OUT=${OUT:-.bench/out}; mkdir -p "$OUT"
MODEL=/tmp/rlloop-9b; ROWS=/tmp/rlloop-rows; PPO=/tmp/rlloop-ppo-16
VARIANTS=${1:-"float32:4:0:0 float32:4:1:0 bfloat16:4:1:0 bfloat16:4:1:1"}
bash bench/gpu/ensure-addon.sh "$OUT/build.log"
[ -f "$MODEL/config.json" ] || python3 bench/gpu/make_9b.py "$MODEL" 2>&1 | grep -v Writing
[ -f "$MODEL/tokenizer.json" ] || python3 bench/gpu/byte_tokenizer.py "$MODEL" config/qwen3.5-chat-template.jinja >/dev/null
MAX_ROWS=$(for v in $VARIANTS; do echo "$v" | cut -d: -f2; done | sort -n | tail -1)
[ -f "$ROWS/rows.json" ] && [ "$(python3 -c "import json;print(len(json.load(open('$ROWS/rows.json'))))")" -ge "$MAX_ROWS" ] ||
  python3 bench/gpu/make_rows.py "$ROWS" --rows "$MAX_ROWS"
[ -f "$PPO/ppo.jsonl" ] || (cd bench/gpu && python3 make_ppo_data.py "$MODEL" "$PPO" --rows 16)
reference=""
for v in $VARIANTS; do
  IFS=: read -r dtype rows kernels tf32 backward <<< "$v"
  dir=/tmp/kc-$dtype-$rows-$kernels-$tf32-${backward:-manual}
  case $tf32 in 0) tf32=off ;; 1) tf32=on ;; esac
  RLLOOP_KERNELS=$kernels RLLOOP_GDN_BACKWARD=${backward:-manual} node bench/gpu/kernel_check.mjs "$MODEL" "$ROWS" "$PPO/adapter" "$dir" --dtype "$dtype" --rows "$rows" --tf32 "$tf32"
  if [ -z "$reference" ]; then reference=$dir; continue; fi
  echo "== $v against ${reference#/tmp/kc-}"
  python3 bench/gpu/compare_kernels.py "$reference" "$dir" | tee "$OUT/kernels-$dtype-$kernels-$tf32-${backward:-manual}.json"
done
