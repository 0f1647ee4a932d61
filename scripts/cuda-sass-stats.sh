#!/usr/bin/env bash
# Static instruction counts of one .cu file's kernels for sm_90, from their SASS: per kernel the instructions, the
# tensor-core products (HMMA), shared loads (LDS), local-memory loads (LDL: arrays that did not stay in registers)
# and integer multiply-adds (IMAD, mostly address arithmetic). A CPU-side look at what a kernel change does to the
# code before spending device time; it says nothing of time (dynamic counts and stalls: Nsight on the GPU machine).
# nvcc comes from scripts/cuda-compile-check.sh's cache (run it once first), cuobjdump from the venv's Triton.
# Usage: bash scripts/cuda-sass-stats.sh [FILE.cu (native/src/delta_rule/fused_cuda.cu)] [kernel-name filter (Lb1E: TF32)]
set -euo pipefail
FILE=${1:-native/src/delta_rule/fused_cuda.cu}
FILTER=${2:-Lb1E}
T=${RLLOOP_CACHE:-$HOME/.cache/rlloop}/cuda-13.0/x/nvidia/cu13
[ -x "$T/bin/nvcc" ] || { echo "no nvcc under $T: run bash scripts/cuda-compile-check.sh first" >&2; exit 1; }
PYTHON=$(node -p "require('./.rlloop/env.json').python")
TORCH_INC=$("$PYTHON" -c "from torch.utils import cpp_extension; print(' '.join('-I' + p for p in cpp_extension.include_paths()))" 2>/dev/null)
CUOBJDUMP=$("$PYTHON" -c "import os, triton; print(os.path.join(os.path.dirname(triton.__file__), 'backends', 'nvidia', 'bin', 'cuobjdump'))")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
PATH=$T/bin:$PATH nvcc -std=c++17 -D_GLIBCXX_USE_CXX11_ABI=1 -Inative/src $TORCH_INC -I"$T/include" -I"$T/include/cccl" \
  -O3 -arch=sm_90 -cubin "$FILE" -o "$out/k.cubin" 2> >(grep -v "No CUDA runtime is found" >&2)
"$CUOBJDUMP" -sass "$out/k.cubin" > "$out/k.sass" 2>/dev/null
python3 - "$out/k.sass" "$FILTER" <<'PY'
import collections, re, shutil, subprocess, sys
counts, name = collections.OrderedDict(), None
for line in open(sys.argv[1]):
    m = re.match(r"\s+Function : (\S+)", line)
    if m:
        name = m.group(1)
        counts[name] = collections.Counter()
        continue
    m = re.match(r"\s+/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", line)
    if name and m:
        counts[name][m.group(1)] += 1
def readable(mangled):  # "void rlloop::block::program_kernel<rlloop::delta_rule::Prep<128>, true>(…)" → "Prep<128>, true"
    if not shutil.which("c++filt"):
        return mangled
    name = subprocess.run(["c++filt", mangled], capture_output=True, text=True).stdout.strip()
    inner = re.search(r"program_kernel<(.*)>\(", name)
    return re.sub(r"\w+::", "", inner.group(1)) if inner else name

columns = ("HMMA", "LDS", "LDL", "IMAD")
print("%-40s %6s %s" % ("kernel", "instr", " ".join("%5s" % c for c in columns)))
for name, c in counts.items():
    if sys.argv[2] in name:
        print("%-40s %6d %s" % (readable(name)[:40], sum(c.values()), " ".join("%5d" % c[k] for k in columns)))
PY
