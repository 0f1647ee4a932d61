# Sourced at the start of every command on the GPU machine (see bench/README.md).
# The machine has python3 with torch but no Node and no network: we carry a compressed Node 20 binary (.node/),
# the production node_modules and the addon build's header packages, and the compiled TypeScript (dist/);
# bench/gpu/pack-device.sh makes them.
set -euo pipefail
export RLLOOP_ROOT=$(pwd)
# A call that runs only the seed (Python) may leave .node behind to carry other things.
if [ ! -x /tmp/node/bin/node ] && [ -f .node/node-20.20.2.xz ]; then
  mkdir -p /tmp/node/bin
  xz -dc .node/node-20.20.2.xz > /tmp/node/bin/node && chmod +x /tmp/node/bin/node
fi
export PATH=/tmp/node/bin:$PATH
if [ ! -d node_modules ] && [ -f .node/prod-modules.tar.xz ]; then
  tar xJf .node/prod-modules.tar.xz
  cp -r .node/headers/* node_modules/
fi
export RLLOOP_PYTHON=$(command -v python3)
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
