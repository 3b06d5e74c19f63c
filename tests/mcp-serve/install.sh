#!/usr/bin/env bash
# Installs the real MCP clients that the `chela mcp serve` tests drive, pinned, into
# target/mcp-serve-peers (or $1): the official Python SDK (`mcp` from PyPI, in a venv), the
# TypeScript SDK (`@modelcontextprotocol/sdk` from npm), its v2 client
# (`@modelcontextprotocol/client`, which speaks 2026-07-28 and its `subscriptions/listen`) and
# the MCP Inspector (`@modelcontextprotocol/inspector`, whose `--cli` the tests run). Does
# nothing for what is there already at its pinned version.
# Needs python3 with venv and node/npm; scripts/test.sh and .ci/run install those from Debian.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-target/mcp-serve-peers}
PY_MCP=2.3.0
TS_SDK=1.32.2
TS_CLIENT=2.3.1
INSPECTOR=2.12.0
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# Tests in parallel processes (nextest runs each test in its own) call this at once: one
# installs while the others wait here, then find the clients installed.
exec 9>"$dir/.lock"
flock 9
if ! "$dir/venv/bin/python" -c "import mcp, importlib.metadata as m; assert m.version('mcp') == '$PY_MCP'" 2>/dev/null; then
  python3 -m venv "$dir/venv"
  "$dir/venv/bin/pip" install --quiet --disable-pip-version-check "mcp==$PY_MCP"
fi
# Whether node/ has npm package $1 at version $2.
has() {
  grep -q "\"version\": \"$2\"" "$dir/node/node_modules/$1/package.json" 2>/dev/null
}
if ! has @modelcontextprotocol/sdk "$TS_SDK" || ! has @modelcontextprotocol/client "$TS_CLIENT" ||
  ! has @modelcontextprotocol/inspector "$INSPECTOR"; then
  mkdir -p "$dir/node"
  (cd "$dir/node" && [ -f package.json ] || echo '{"name":"chela-mcp-serve-peers","private":true}' >package.json)
  # The Inspector asks for a newer Node in its package.json; its CLI runs on the Node 20 that
  # Debian's nodejs gives (the tests run it), so the engine check is only a warning here.
  (cd "$dir/node" && npm install --silent --no-audit --no-fund --engine-strict=false \
    "@modelcontextprotocol/sdk@$TS_SDK" "@modelcontextprotocol/client@$TS_CLIENT" \
    "@modelcontextprotocol/inspector@$INSPECTOR" >/dev/null)
fi
# ESM resolves packages beside the script, so the TypeScript clients run from there.
cp tests/mcp-serve/client.mjs tests/mcp-serve/listen.mjs "$dir/node/"
echo "$dir"
