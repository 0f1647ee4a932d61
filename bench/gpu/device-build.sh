#!/usr/bin/env bash
# Builds the CUDA variant of the native module on the GPU machine with plain cmake (cmake-js itself is not carried):
# the same CMakeLists.txt, the Node-API headers from node-api-headers, torch from the machine's python3.
source bench/gpu/device-env.sh
read -r TORCH_INC TORCH_LIB ABI < <(python3 -c "
import torch, os
from torch.utils import cpp_extension
print(';'.join(cpp_extension.include_paths()), os.path.join(os.path.dirname(torch.__file__), 'lib'), int(torch._C._GLIBCXX_USE_CXX11_ABI))")
NAPI_INC=$(node -p "require('node-api-headers').include_dir")
[ -x /usr/local/cuda/bin/nvcc ] && export PATH=/usr/local/cuda/bin:$PATH
nvcc --version | tail -2
cmake -S native -B native/build -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_JS_INC="$NAPI_INC" -DTORCH_INCLUDE_DIRS="$TORCH_INC" -DTORCH_LIB_DIR="$TORCH_LIB" \
  -DTORCH_CXX11_ABI="$ABI" -DNLOHMANN_JSON_INCLUDE_DIR="$PWD/.node/headers/nlohmann-json" -DRLLOOP_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_LIBRARY_OUTPUT_DIRECTORY="$PWD/native/build/Release" >/dev/null
cmake --build native/build -j "$(nproc)"
ls -la native/build/Release/*.node
