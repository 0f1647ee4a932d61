#!/usr/bin/env bash
# Triton >= 3.7.1 for the flash-linear-attention baseline (FLA refuses its GDN backward on Hopper with the GPU
# machine's Triton 3.6, see RESULTS.md), carried in parts: trimmed (no CUPTI/proton profiler, no Blackwell ptxas,
# no disassemblers) and xz-compressed it is ~86 MB, more than one device call carries (64 MiB). Four parts of
# ~21 MB each travel beside Node (.node, ~37 MB), so each of four calls back to back on one warm machine can run
# rlloop too. The AMD backend stays: Triton imports every backend its dist-info's entry points name (a trimmed one
# failed so).
#   host:   bash bench/gpu/carry_triton.sh split WHEEL [PARTS=4]  -> .tri1/p1 … .triN/pN
#   device: bash bench/gpu/carry_triton.sh stash    (each call carrying one .triK: keeps its part in /tmp)
#           bash bench/gpu/carry_triton.sh join     (the call with the last part, on the same warm machine)
# After join, /tmp/triton holds the package; ppo_bench.sh's seed-fla entries put it first on PYTHONPATH.
set -euo pipefail
stash() { mkdir -p /tmp/triton-parts; for part in .tri*/p*; do [ -f "$part" ] && cp "$part" /tmp/triton-parts/; done; ls /tmp/triton-parts; }
case ${1:-} in
  split)
    work=$(mktemp -d); unzip -q "$2" -d "$work"
    rm -rf "$work"/triton/backends/nvidia/lib/cupti "$work"/triton/_C/libproton.so \
      "$work"/triton/backends/nvidia/bin/{ptxas-blackwell,nvdisasm,cuobjdump} \
      "$work"/triton/instrumentation/libGPUInstrumentationTestLib.so "$work"/triton/plugins/libTritonPluginsTestLib.so
    xz -T1 --lzma2=preset=9e,dict=512MiB -c "$work"/triton/_C/libtriton.so > "$work"/lib.xz  # ~5 min on 2 cores
    rm "$work"/triton/_C/libtriton.so
    (cd "$work" && tar cf - triton triton-*.dist-info | xz -9 > rest.xz)
    stat -c %s "$work"/lib.xz > "$work"/lib.size
    cat "$work"/lib.size "$work"/lib.xz "$work"/rest.xz > "$work"/all  # first line: the library's compressed size
    parts=${3:-4}; size=$(( ($(stat -c %s "$work"/all) + parts - 1) / parts ))
    rm -rf .tri[0-9]*
    for k in $(seq 1 "$parts"); do
      mkdir -p ".tri$k"
      dd if="$work"/all of=".tri$k/p$k" iflag=skip_bytes,count_bytes skip=$(( (k - 1) * size )) count="$size" status=none
    done
    rm -rf "$work"; ls -la .tri[0-9]* ;;
  stash) stash ;;
  join)
    stash; all=/tmp/triton-parts/all
    ls /tmp/triton-parts/p* | sort -V | xargs cat > $all
    size=$(head -1 $all); skip=$(( $(head -1 $all | wc -c) ))
    rm -rf /tmp/triton && mkdir -p /tmp/triton
    tail -c +$((skip + 1)) $all > $all.body  # files, not pipes: a head closing a pipe would fail the tail (pipefail)
    head -c "$size" $all.body | xz -d > /tmp/triton/libtriton.so
    tail -c +$((size + 1)) $all.body | xz -d | tar x -C /tmp/triton
    rm -f $all $all.body
    mv /tmp/triton/libtriton.so /tmp/triton/triton/_C/
    PYTHONPATH=/tmp/triton python3 -c "import triton; print('triton', triton.__version__, triton.__file__)" ;;
  *) echo "usage: carry_triton.sh split WHEEL [PARTS] | stash | join" >&2; exit 2 ;;
esac
