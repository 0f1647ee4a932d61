#!/usr/bin/env bash
# One-time (idempotent) setup of everything rlloop needs on a fresh machine:
#   1. a Python venv with torch/transformers/peft (the libtorch we link, and the test reference),
#      cached outside the clone under $RLLOOP_CACHE keyed by the pinned versions;
#   2. nats-server (Debian package, else `go install`);
#   3. npm dependencies; 4. the native module (cmake-js against the venv's libtorch); 5. the TypeScript build.
# Writes .rlloop/env.json so the CLI and the tests find the venv's python and nats-server.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/versions.sh

CACHE=${RLLOOP_CACHE:-$HOME/.cache/rlloop}
KEY="torch${TORCH_VERSION}-tv${TORCHVISION_VERSION}-tf${TRANSFORMERS_VERSION}-peft${PEFT_VERSION}-st${SAFETENSORS_VERSION}-tok${TOKENIZERS_PY_VERSION}"
VENV="$CACHE/py-$KEY"
log() { printf '[setup %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
mkdir -p "$CACHE" .rlloop

if [ ! -f "$VENV/.complete" ]; then
  log "creating Python venv $VENV (torch $TORCH_VERSION: a few GB the first time, cached afterwards)"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q --cache-dir "$CACHE/pip" \
    "torch==$TORCH_VERSION" "torchvision==$TORCHVISION_VERSION" "transformers==$TRANSFORMERS_VERSION" \
    "peft==$PEFT_VERSION" "safetensors==$SAFETENSORS_VERSION" "tokenizers==$TOKENIZERS_PY_VERSION" \
    "pillow==$PILLOW_VERSION" "numpy==$NUMPY_VERSION"
  touch "$VENV/.complete"
else
  log "Python venv cached: $VENV"
fi
PYTHON="$VENV/bin/python"

NATS_SERVER=$(command -v nats-server || true)
if [ -z "$NATS_SERVER" ] && [ -x "$CACHE/go-bin/nats-server" ]; then NATS_SERVER="$CACHE/go-bin/nats-server"; fi
if [ -z "$NATS_SERVER" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  log "installing nats-server (Debian package)"
  (apt-get install -y -qq nats-server >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq nats-server >/dev/null; }) || true
  NATS_SERVER=$(command -v nats-server || true)
fi
if [ -z "$NATS_SERVER" ]; then
  log "building nats-server $NATS_SERVER_GO_VERSION with go install"
  GOBIN="$CACHE/go-bin" go install "github.com/nats-io/nats-server/v2@$NATS_SERVER_GO_VERSION"
  NATS_SERVER="$CACHE/go-bin/nats-server"
fi
log "nats-server: $NATS_SERVER ($("$NATS_SERVER" --version))"

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  log "npm ci"
  npm ci --no-audit --no-fund
fi

cat > .rlloop/env.json <<JSON
{ "python": "$PYTHON", "natsServer": "$NATS_SERVER", "cache": "$CACHE" }
JSON

log "building the native module against $("$PYTHON" -c 'import torch; print(torch.__version__)')"
RLLOOP_PYTHON="$PYTHON" node scripts/build-native.mjs
log "building TypeScript"
npx tsc -p tsconfig.json
log "setup done"
