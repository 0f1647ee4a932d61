#!/usr/bin/env bash
# Compiles the CUDA variant of the native module on a machine without a GPU or a CUDA toolkit, to catch compile
# errors before a device call: every native/src/**/*.cu with nvcc for sm_90, and the .cpp files that have RLLOOP_CUDA
# code with -DRLLOOP_CUDA=1 (syntax only; nothing is linked). nvcc and the CUDA headers come from NVIDIA's PyPI
# wheels (CUDA 13.0, the GPU machine's), unpacked once under $RLLOOP_CACHE/cuda-13.0; libtorch's headers from the
# venv scripts/setup.sh made. Not part of CI (a ~900 MB download the first time; the headers of cuBLAS, cuSPARSE
# and cuSOLVER are all it keeps of those three). With --ptxas, also each kernel's registers, spills and stack as
# ptxas reports them, one kernel a line. Usage: bash scripts/cuda-compile-check.sh [--ptxas] [FILE.cu|FILE.cpp ...]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/versions.sh
CACHE=${RLLOOP_CACHE:-$HOME/.cache/rlloop}
CUDA=$CACHE/cuda-13.0
PYTHON=$(node -p "require('./.rlloop/env.json').python")
TORCH_INC=$("$PYTHON" -c "from torch.utils import cpp_extension; print(' '.join('-I' + p for p in cpp_extension.include_paths()))")
if [ ! -x "$CUDA/x/nvidia/cu13/bin/nvcc" ]; then
  wheels=$(mktemp -d)
  for p in "nvidia-cuda-nvcc==13.0.*" "nvidia-cuda-runtime==13.0.*" "nvidia-cuda-cccl==13.0.*" "nvidia-cuda-crt==13.0.*" \
           "nvidia-nvvm==13.0.*" "nvidia-cublas==13.0.*" "nvidia-cusparse==12.6.*" "nvidia-cusolver==12.0.*"; do
    python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 \
      --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d "$wheels" "$p"
  done
  mkdir -p "$CUDA/x"
  for w in "$wheels"/*.whl; do
    case $w in
      *cublas*|*cusparse*|*cusolver*) unzip -q -o "$w" 'nvidia/*/include/*' -d "$CUDA/x" ;;
      *) unzip -q -o "$w" -d "$CUDA/x" ;;
    esac
  done
  rm -rf "$wheels"
fi
NCCL_INC=$("$PYTHON" -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'include'))")
T=$CUDA/x/nvidia/cu13
export PATH=$T/bin:$PATH
FLAGS="-std=c++17 -D_GLIBCXX_USE_CXX11_ABI=1 -Inative/src $TORCH_INC -I$T/include -I$T/include/cccl"
ptxas=0
if [ "${1:-}" = --ptxas ]; then ptxas=1; shift; fi
files=("$@")
[ ${#files[@]} -gt 0 ] || mapfile -t files < <(find native/src -name "*.cu" | sort; grep -rl --include="*.cpp" "RLLOOP_CUDA" native/src | sort)
out=$(mktemp -d)
status=0
for f in "${files[@]}"; do
  case $f in
    *.cu) if [ $ptxas = 1 ]; then
            nvcc $FLAGS -O3 -arch=sm_90 -Xptxas -v -c "$f" -o "$out/$(echo "$f" | tr / _).o" 2>&1 |
              awk '/Compiling entry function/ { name = $0; sub(/.*entry function ./, "", name); sub(/. for .sm_90.*/, "", name) }
                   /bytes stack frame/ { stack = $0; sub(/^ +/, "", stack) }
                   /Used [0-9]+ registers/ { used = $0; sub(/.*: +/, "", used); print name ": " used "; " stack }
                   /error/ { print }' || status=1
          else
            nvcc $FLAGS -O3 -arch=sm_90 -c "$f" -o "$out/$(echo "$f" | tr / _).o" || status=1
          fi ;;
    *.cpp) g++ $FLAGS -DRLLOOP_CUDA=1 -DUSE_C10D_NCCL -I"$NCCL_INC" -fsyntax-only -Inode_modules/node-addon-api -I"$(node -p "require('node-api-headers').include_dir")" "$f" || status=1 ;;
  esac
  echo "checked $f"
done
rm -rf "$out"
exit $status
