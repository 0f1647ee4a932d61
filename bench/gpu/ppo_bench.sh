#!/usr/bin/env bash
# Issue 5 on the GPU machine: one PPO round (and one SFT epoch) of rlloop and of the seed trainer, side by side in
# the same run, on the same random-weight 9B-shape checkpoint and the same rows (640x480 frames, ~420 tokens a row,
# batch 16, accumulation 2, 2 epochs). The seed runs as the unmodified file (copied to .bench/seed/bt_train.py by
# the host, see bench/README.md) through seed_timed.py; "seed-fla" adds flash-linear-attention (carried wheels).
# Usage: bash bench/gpu/ppo_bench.sh [ROWS=256] ["rlloop seed seed-fla rlloop-sft seed-sft rlloop-nockpt resident"]
# ("prepare": the checkpoint, the rows and the addon alone, no run)
source bench/gpu/device-env.sh
OUT=${OUT:-.bench/out}; mkdir -p "$OUT"
ROWS=${1:-256}
WHICH=${2:-"rlloop seed seed-fla"}
MODEL=/tmp/rlloop-9b; DATA=/tmp/rlloop-ppo-$ROWS; TREE=/tmp/seed-tree
# Trained adapters (and the build log, the running report) stay under /tmp, not $OUT: a device call returns 8 files
# at most, and those should be the runs' logs and the reports.
TRAINED=/tmp/rlloop-bench-trained; mkdir -p "$TRAINED"
COMMAND="bash bench/gpu/ppo_bench.sh $ROWS \"$WHICH\""
building=""
case " $WHICH " in *" rlloop"*|*" resident "*|*" prepare "*)  # the seed entries need no build (nor Node)
  # beside the checkpoint and the data (a fresh machine: ~1-2 minutes each; they share the cores); stopped if those fail
  bash bench/gpu/ensure-addon.sh /tmp/rlloop-build.log & building=$!
  trap 'kill "$building" 2>/dev/null || true' EXIT ;;
esac
[ -f "$MODEL/config.json" ] || python3 bench/gpu/make_9b.py "$MODEL" 2>&1 | grep -v Writing
[ -f "$MODEL/tokenizer.json" ] || python3 bench/gpu/byte_tokenizer.py "$MODEL" config/qwen3.5-chat-template.jinja >/dev/null
[ -f "$DATA/ppo.jsonl" ] || (cd bench/gpu && python3 make_ppo_data.py "$MODEL" "$DATA" --rows "$ROWS")
[ -z "$building" ] || { wait "$building"; trap - EXIT; }  # a failed build ends the script here (set -e)
case " $WHICH " in *" seed"*)  # the seed's tree (rlloop-only runs need no copy of the seed)
  mkdir -p "$TREE/train" "$TREE/models"
  cp .bench/seed/bt_train.py bench/gpu/seed_stand_in/ctrl_policy.py "$TREE/train/"
  ln -sfn "$MODEL" "$TREE/models/Qwen3.5-9B" ;;
esac
PPO_FLAGS=(--data "$DATA/ppo.jsonl" --adapter "$DATA/adapter" --ref "$DATA/adapter")
SFT_FLAGS=(--data "$DATA/sft.jsonl" --valid "$DATA/valid.jsonl")
seed() {  # seed NAME MODE FLAGS...
  local name=$1; shift
  CUDA_VISIBLE_DEVICES=0 timeout "${RUN_TIMEOUT:-400}" python3 -m torch.distributed.run --nproc_per_node=1 bench/gpu/seed_timed.py "$TREE" "$@" \
    --out "$TRAINED/$name" > "$OUT/$name.log" 2>&1 || { tail -25 "$OUT/$name.log"; return 1; }
  grep -E "SEED_TIMING|PPO_DONE|VALID" "$OUT/$name.log"
}
rlloop() {  # rlloop NAME MODE FLAGS...
  local name=$1; shift
  timeout "${RUN_TIMEOUT:-400}" node bin/rlloop.js train "$@" --model "$MODEL" --prompt bench/gpu/prompt.jinja --device cuda --gpus 1 \
    --out "$TRAINED/$name" > "$OUT/$name.log" 2>&1 || { tail -25 "$OUT/$name.log"; return 1; }
  grep -E '"msg":"(job|ppo|sft) (start|done)"' "$OUT/$name.log" | cut -c1-400
  [ "$1" = ppo ] && python3 bench/gpu/round_phases.py "$OUT/$name.log" || true  # where the round's time went
}
for w in $WHICH; do
  echo "== $w"
  case $w in
    prepare) ;;
    rlloop) rlloop rlloop-ppo ppo "${PPO_FLAGS[@]}" ;;
    rlloop-nockpt) rlloop rlloop-nockpt-ppo ppo "${PPO_FLAGS[@]}" --checkpointing off ;;
    rlloop-sft) rlloop rlloop-sft sft "${SFT_FLAGS[@]}" ;;
    seed) seed seed-ppo ppo "${PPO_FLAGS[@]}" ;;
    resident)  # two PPO rounds on one resident rank (round latency, model already loaded)
      RLLOOP_LOG_LEVEL=${RLLOOP_LOG_LEVEL:-info} timeout "${RUN_TIMEOUT:-400}" node bench/gpu/resident_rounds.mjs "$MODEL" "$DATA" "$TRAINED/resident" > "$OUT/resident.log" 2>&1 \
        || { tail -25 "$OUT/resident.log"; false; }
      grep -E '"event"' "$OUT/resident.log" | cut -c1-400 ;;
    seed-sft) seed seed-sft sft "${SFT_FLAGS[@]}" ;;
    seed-fla|seed-fla-sft)
      [ -d /tmp/fla ] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/fla .whl/*.whl
      # FLA's GDN backward needs Triton >= 3.7.1 on Hopper; carry_triton.sh puts one carried in parts at /tmp/triton
      fla_path=/tmp/fla; [ -d /tmp/triton/triton ] && fla_path=/tmp/triton:/tmp/fla
      if [ $w = seed-fla ]; then PYTHONPATH=$fla_path seed seed-fla-ppo ppo "${PPO_FLAGS[@]}"
      else PYTHONPATH=$fla_path seed seed-fla-sft sft "${SFT_FLAGS[@]}"; fi ;;
  esac || echo "== $w FAILED"
  [ "$w" = prepare ] || python3 bench/gpu/ppo_report.py "$OUT" "$ROWS" "$COMMAND" > /tmp/rlloop-bench-report.txt  # the table so far
done
[ "$WHICH" = prepare ] || cat /tmp/rlloop-bench-report.txt
