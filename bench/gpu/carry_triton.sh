#!/usr/bin/env bash
# Triton >= 3.7.1 for the flash-linear-attention baseline (FLA refuses its GDN backward on Hopper with the GPU
# machine's Triton 3.6, see RESULTS.md), carried in two parts: trimmed (no CUPTI/proton profiler, no Blackwell
# ptxas, no disassemblers) and xz-compressed it is ~86 MB, more than one device call carries next to Node (64 MiB).
# The AMD backend stays: Triton imports every backend its dist-info's entry points name (a trimmed one failed so).
#   host:   bash bench/gpu/carry_triton.sh split WHEEL   -> .tri1/p1 (62 MB) and .tri2/p2 (the rest)
#   device: bash bench/gpu/carry_triton.sh stash          (in the first call, carrying .tri1: keeps p1 in /tmp)
#           bash bench/gpu/carry_triton.sh join           (in the next call on the same warm machine, carrying .tri2)
# After join, /tmp/triton holds the package; ppo_bench.sh's seed-fla entries put it first on PYTHONPATH.
set -euo pipefail
PART1=62000000
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
    mkdir -p .tri1 .tri2
    cat "$work"/lib.size "$work"/lib.xz "$work"/rest.xz > "$work"/all  # first line: the library's compressed size
    head -c $PART1 "$work"/all > .tri1/p1; tail -c +$((PART1 + 1)) "$work"/all > .tri2/p2
    rm -rf "$work"; ls -la .tri1 .tri2 ;;
  stash) mkdir -p /tmp/triton-parts && cp .tri1/p1 /tmp/triton-parts/ ;;
  join)
    all=/tmp/triton-parts/all; cat /tmp/triton-parts/p1 .tri2/p2 > $all
    size=$(head -1 $all); skip=$(( $(head -1 $all | wc -c) ))
    rm -rf /tmp/triton && mkdir -p /tmp/triton
    tail -c +$((skip + 1)) $all > $all.body  # files, not pipes: a head closing a pipe would fail the tail (pipefail)
    head -c "$size" $all.body | xz -d > /tmp/triton/libtriton.so
    tail -c +$((size + 1)) $all.body | xz -d | tar x -C /tmp/triton
    rm -f $all $all.body
    mv /tmp/triton/libtriton.so /tmp/triton/triton/_C/
    PYTHONPATH=/tmp/triton python3 -c "import triton; print('triton', triton.__version__, triton.__file__)" ;;
  *) echo "usage: carry_triton.sh split WHEEL | stash | join" >&2; exit 2 ;;
esac
