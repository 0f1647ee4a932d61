#!/usr/bin/env bash
# rlloop against an earlier rlloop on one machine, alternating, so a change's effect is measured in the same call
# (machines differ by more than most changes: RESULTS.md). OLD is a checkout of the earlier commit with its dist/
# built on the host (`git worktree add .old <commit>`, `npx tsc` there) and carried; the two trees share one addon
# build when their native/ sources are the same. Prints each round and where its time went (round_phases.py).
# Usage: bash bench/gpu/ab_rlloop.sh OLD ["new old new old"]
source bench/gpu/device-env.sh
OUT=${OUT:-.bench/out}; mkdir -p "$OUT"
OLD=$1; ORDER=${2:-"new old new old"}
ln -sfn "$PWD/.node" "$OLD/.node"; mkdir -p "$OLD/.bench"; cp -r .bench/seed "$OLD/.bench/" 2>/dev/null || true
# the checkpoint, the rows and this tree's addon first (built beside them); a new build comes back with $OUT, and
# every build of the call is offered to OLD: its ensure-addon.sh takes the one of its own sources' hash (a change
# without native/ changes builds once), else builds its own
OUT=/tmp/ab-prepare bash bench/gpu/ppo_bench.sh 256 prepare > /tmp/ab-prepare.txt 2>&1 || { tail -30 /tmp/ab-prepare.txt; exit 1; }
cp /tmp/ab-prepare/*.node "$OUT/" 2>/dev/null || true
mkdir -p "$OLD/.bench/addon"; cp .bench/addon/*.node "$OLD/.bench/addon/" 2>/dev/null || true
i=0
for which in $ORDER; do
  i=$((i + 1))
  tree=$PWD; [ "$which" = old ] && tree=$OLD
  (cd "$tree" && OUT=/tmp/ab-$i bash bench/gpu/ppo_bench.sh 256 rlloop > /tmp/ab-$i.txt 2>&1) || { echo "== $which FAILED"; tail -20 /tmp/ab-$i.txt; }
  cp /tmp/ab-$i/rlloop-ppo.log "/tmp/ab-$i-$which.log" 2>/dev/null || true
  cp /tmp/ab-$i/*.node "$OUT/" 2>/dev/null || true  # the old tree's own build, where it made one
  printf '%-4s %s\n' "$which" "$(grep -so '"seconds":[0-9.]*,"peakGpuGiB":[0-9.]*' "/tmp/ab-$i-$which.log" | head -1)"
  python3 bench/gpu/round_phases.py "/tmp/ab-$i-$which.log" 2>&1 | sed 's/^/     /' || true  # where its time went
done | tee "$OUT/ab.txt"
tar czf "$OUT/ab-logs.tgz" -C /tmp $(cd /tmp && ls ab-*-*.log 2>/dev/null)
