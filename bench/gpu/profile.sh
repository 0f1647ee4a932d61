#!/usr/bin/env bash
# Where the time of a PPO round goes, on the GPU machine: one rlloop PPO run (ROWS rows, same setup as
# ppo_bench.sh) with the native module's Kineto profiler on the given windows of worker tasks (default: one frozen
# 32-row forward; windows spanning a CUDA backward crash the process, see docs/native-api.md), then
# profile_report.py on each trace; and the backward timeline of every training step (RLLOOP_BACKWARD_TIMELINE,
# backward_report.py), which covers what Kineto cannot. Usage: bash bench/gpu/profile.sh [ROWS=128] [WINDOWS]
# (the frozen pass skips the first update's rows: 128 rows give it three 32-row batches, 64 rows only one)
source bench/gpu/device-env.sh
OUT=${OUT:-.bench/out}; mkdir -p "$OUT"
ROWS=${1:-128}
export RLLOOP_PROFILE_TRACE=/tmp/rlloop-trace.json
export RLLOOP_PROFILE_WINDOWS=${2:-"logprobs#2:1"}
export RLLOOP_BACKWARD_TIMELINE=$OUT/backward-timeline.jsonl  # the backward by segment (Kineto cannot trace it)
rm -f "$RLLOOP_BACKWARD_TIMELINE"
bash bench/gpu/ppo_bench.sh "$ROWS" rlloop
grep -h "profile written" "$OUT"/rlloop-ppo.log || echo "no profile written: no window $RLLOOP_PROFILE_WINDOWS in this run"
python3 bench/gpu/backward_report.py "$RLLOOP_BACKWARD_TIMELINE" | tee "$OUT/backward-timeline.txt"
for trace in /tmp/rlloop-trace-*.json; do
  [ -f "$trace" ] || continue
  name=$(basename "$trace" .json)
  python3 bench/gpu/profile_report.py "$trace" --top 30 --json "$OUT/$name.summary.json" | tee "$OUT/$name.txt"
  gzip -1 -c "$trace" > "$OUT/$name.json.gz"
done
