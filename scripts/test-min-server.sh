#!/usr/bin/env bash
# The smoke subset against the oldest nats-server the daemon supports (scripts/versions.sh NATS_SERVER_MIN_VERSION,
# installed by scripts/setup.sh): end to end, rejections, faults, poison isolation and the id memory.
set -euo pipefail
cd "$(dirname "$0")/.."
RLLOOP_NATS_SERVER=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(".rlloop/env.json","utf8")).natsServerMin)')
export RLLOOP_NATS_SERVER
echo "[test:min-server] $("$RLLOOP_NATS_SERVER" --version)"
npx vitest run test/loop-e2e.test.ts test/loop-reject.test.ts test/loop-faults.test.ts test/loop-poison.test.ts "$@"
