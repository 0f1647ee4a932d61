#!/usr/bin/env bash
# The CUDA build of the addon on the GPU machine, built at most once per source: a build that an earlier call
# brought back ($OUT/rlloop_native-<hash>.node, copied by the host into .bench/addon/ and carried with .bench) is
# used when <hash> matches this tree's native/ sources; otherwise device-build.sh builds it and a copy goes to $OUT
# for the next call (a fresh machine then skips the ~1 minute build). Nothing to do when a build is already there
# (a warm machine). Usage: bash bench/gpu/ensure-addon.sh BUILD_LOG
set -euo pipefail
LOG=${1:-/tmp/rlloop-build.log}
ADDON=native/build/Release/rlloop_native.node
# the sources in byte order whatever the machine's locale (a glob sorts by the shell's collation: the host's and the
# GPU machine's hashed the same tree differently)
hash=$(cd native && { echo CMakeLists.txt; find src -type f; } | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16)
if [ -f "$ADDON" ]; then  # a warm machine's build; kept under its hash too, for another tree of the call
  mkdir -p .bench/addon; [ -f ".bench/addon/rlloop_native-$hash.node" ] || cp "$ADDON" ".bench/addon/rlloop_native-$hash.node"
  exit 0
fi
if [ -f ".bench/addon/rlloop_native-$hash.node" ]; then
  mkdir -p "$(dirname "$ADDON")" && cp ".bench/addon/rlloop_native-$hash.node" "$ADDON"
  echo "addon: the carried build of sources $hash"
  exit 0
fi
bash bench/gpu/device-build.sh > "$LOG" 2>&1 || { tail -30 "$LOG"; exit 1; }
if [ -n "${OUT:-}" ]; then cp "$ADDON" "$OUT/rlloop_native-$hash.node"; fi
# also here, named by its sources: another tree of the call with the same sources (ab_rlloop.sh's OLD) takes it
mkdir -p .bench/addon && cp "$ADDON" ".bench/addon/rlloop_native-$hash.node"
