#!/usr/bin/env bash
# On the GPU machine: update_cosine.sh's comparison for two trees at once — this one and OLD (a checkout of an
# earlier commit, as ab_rlloop.sh's) — so a kernel change's effect on the bf16 update is measured against the code
# before in the same call, with enough runs to see past bf16 training's run-to-run spread (atomics in the backward:
# its cosine varies by ~0.01 from run to run). Each tree runs one float32 round, then bfloat16 rounds alternate
# between the trees for SECONDS; update_cosine.py compares every bfloat16 round with both float32 ones. A failed
# round is reported and left out.
# Usage: bash bench/gpu/update_cosine_ab.sh OLD [SECONDS=400] [ROWS=32]
source bench/gpu/device-env.sh
set +e  # a failed round is left out, not the end of the comparison
mkdir -p "${OUT:-.bench/out}"; OUT=$(cd "${OUT:-.bench/out}" && pwd)  # absolute: the rounds run in either tree
OLD=$1; SECONDS_LIMIT=${2:-400}; ROWS=${3:-32}
MODEL=/tmp/rlloop-9b; DATA=/tmp/rlloop-ppo-$ROWS; TRAINED=/tmp/rlloop-cosine-ab
[ -e "$OLD/.node" ] || ln -s "$PWD/.node" "$OLD/.node"  # the build's header packages, as ab_rlloop.sh
bash bench/gpu/ensure-addon.sh /tmp/rlloop-build.log || exit 1
(cd "$OLD" && source bench/gpu/device-env.sh && bash bench/gpu/ensure-addon.sh /tmp/rlloop-build-old.log) || exit 1
[ -f "$MODEL/config.json" ] || python3 bench/gpu/make_9b.py "$MODEL" 2>&1 | grep -v Writing
[ -f "$MODEL/tokenizer.json" ] || python3 bench/gpu/byte_tokenizer.py "$MODEL" config/qwen3.5-chat-template.jinja >/dev/null
[ -f "$DATA/ppo.jsonl" ] || (cd bench/gpu && python3 make_ppo_data.py "$MODEL" "$DATA" --rows "$ROWS")
rm -rf "$TRAINED"
round() {  # round TREE NAME DTYPE
  (cd "$1" && RLLOOP_KERNELS=1 timeout "${RUN_TIMEOUT:-400}" node bin/rlloop.js train ppo --data "$DATA/ppo.jsonl" \
    --adapter "$DATA/adapter" --ref "$DATA/adapter" --model "$MODEL" --prompt bench/gpu/prompt.jinja --device cuda \
    --gpus 1 --dtype "$3" --out "$TRAINED/$2" > "$OUT/cosine-$2.log" 2>&1) || { echo "$2 FAILED"; tail -20 "$OUT/cosine-$2.log"; rm -rf "${TRAINED:?}/$2"; return 1; }
  echo "$2 $(grep -o '"logp_gap":[-0-9.]*' "$OUT/cosine-$2.log" | head -1)"  # the frozen log-probs' fingerprint
}
round . float32-new float32 && round "$OLD" float32-old float32 || exit 1
began=$(date +%s)
i=0
while [ $(( $(date +%s) - began )) -lt "$SECONDS_LIMIT" ]; do
  i=$((i + 1)); round . "bfloat16-new-$i" bfloat16; round "$OLD" "bfloat16-old-$i" bfloat16
done
compgen -G "$TRAINED/bfloat16-*" > /dev/null || { echo "no bfloat16 round finished"; exit 1; }
for ref in float32-new float32-old; do
  python3 bench/gpu/update_cosine.py "$DATA/adapter" "$TRAINED/$ref" "$TRAINED"/bfloat16-*
done > "$OUT/update-cosine-ab.jsonl"
python3 - "$OUT/update-cosine-ab.jsonl" <<'PY' | tee "$OUT/update-cosine-ab.txt"
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
for ref in ("float32-new", "float32-old"):
    for tree in ("new", "old"):
        c = [r["cosine"] for r in rows if r["reference"].endswith(ref) and f"bfloat16-{tree}-" in r["run"]]
        if len(c) < 2:
            print(f"against {ref}: {tree} n={len(c)} (too few runs for a spread) {c}")
            continue
        print(f"against {ref}: {tree} n={len(c)} cosine mean {statistics.mean(c):.4f} sd {statistics.stdev(c):.4f} "
              f"se {statistics.stdev(c) / len(c) ** 0.5:.4f} range {min(c):.4f}-{max(c):.4f}")
PY
