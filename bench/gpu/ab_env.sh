#!/usr/bin/env bash
# rlloop against itself with one environment setting changed, alternating on one machine (a diagnostic switch's
# effect, such as RLLOOP_WARM_UP=off, measured in the same call: machines differ by more than most changes). Each
# run is a whole `ppo_bench.sh 256 rlloop` process; the line per run gives its wall time (process start to exit),
# the model's load ("model loaded": loadS, and readyS with the warm-up) and the job's seconds and peak.
# With EVICT=1 the checkpoint's files are dropped from the page cache before each run (posix_fadvise DONTNEED), so
# the load reads the disk as a first run on a host would.
# Usage: [EVICT=1] bash bench/gpu/ab_env.sh VAR=VALUE ["base set base set"]
source bench/gpu/device-env.sh
OUT=${OUT:-.bench/out}; mkdir -p "$OUT"
SETTING=$1; ORDER=${2:-"base set base set"}
# the addon, the checkpoint and the rows first, outside the timings (as ppo_bench.sh makes them)
bash bench/gpu/ensure-addon.sh /tmp/rlloop-build.log || exit 1
[ -f /tmp/rlloop-9b/config.json ] || python3 bench/gpu/make_9b.py /tmp/rlloop-9b 2>&1 | grep -v Writing
[ -f /tmp/rlloop-9b/tokenizer.json ] || python3 bench/gpu/byte_tokenizer.py /tmp/rlloop-9b config/qwen3.5-chat-template.jinja >/dev/null
[ -f /tmp/rlloop-ppo-256/ppo.jsonl ] || (cd bench/gpu && python3 make_ppo_data.py /tmp/rlloop-9b /tmp/rlloop-ppo-256 --rows 256)
i=0
for which in $ORDER; do
  i=$((i + 1))
  setting=(); [ "$which" = set ] && setting=("$SETTING")
  if [ "${EVICT:-0}" = 1 ]; then
    sync  # (dirty pages, such as a checkpoint just written, are not dropped)
    python3 -c 'import os, sys
for name in os.listdir(sys.argv[1]):
    fd = os.open(os.path.join(sys.argv[1], name), os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' /tmp/rlloop-9b
  fi
  began=$(date +%s.%N)
  env "${setting[@]}" OUT=/tmp/ab-env-$i bash bench/gpu/ppo_bench.sh 256 rlloop > /tmp/ab-env-$i.txt 2>&1 || { echo "== $which FAILED"; tail -20 /tmp/ab-env-$i.txt; }
  wall=$(awk "BEGIN { print $(date +%s.%N) - $began }")
  log=/tmp/ab-env-$i-$which.log; cp /tmp/ab-env-$i/rlloop-ppo.log "$log" 2>/dev/null || true
  printf '%-4s wall %.2f s  %s  %s\n' "$which" "$wall" "$(grep -o '"loadS":[0-9.]*,"readyS":[0-9.]*' "$log" | head -1)" \
    "$(grep -o '"seconds":[0-9.]*,"peakGpuGiB":[0-9.]*' "$log" | head -1)"
done | tee "$OUT/ab-env.txt"
tar czf "$OUT/ab-env-logs.tgz" -C /tmp $(cd /tmp && ls ab-env-*-*.log)
