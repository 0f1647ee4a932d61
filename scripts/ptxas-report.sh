#!/usr/bin/env bash
# Registers, spills and stack of every kernel in one .cu file, compiled for sm_90 with the toolchain of
# cuda-compile-check.sh (run that once first): the resource report ptxas gives, one line a kernel.
# Usage: bash scripts/ptxas-report.sh native/src/delta_rule_kernels.cu
set -euo pipefail
cd "$(dirname "$0")/.."
T=${RLLOOP_CACHE:-$HOME/.cache/rlloop}/cuda-13.0/x/nvidia/cu13
PYTHON=$(node -p "require('./.rlloop/env.json').python")
TORCH_INC=$("$PYTHON" -c "from torch.utils import cpp_extension; print(' '.join('-I' + p for p in cpp_extension.include_paths()))")
out=$(mktemp -d)
PATH=$T/bin:$PATH nvcc -std=c++17 -D_GLIBCXX_USE_CXX11_ABI=1 $TORCH_INC -I$T/include -I$T/include/cccl -O3 -arch=sm_90 \
  -Xptxas -v -c "$1" -o "$out/k.o" 2>&1 |
  awk '/Compiling entry function/ { name = $0; sub(/.*entry function ./, "", name); sub(/. for .sm_90.*/, "", name) }
       /bytes stack frame/ { stack = $0 }
       /Used [0-9]+ registers/ { print name; print "   " stack; print "   " $0 }' |
  sed -E 's/_ZN6rlloop5block14program_kernelIN10delta_rule//'
rm -rf "$out"
