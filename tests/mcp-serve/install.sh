#!/usr/bin/env bash
# Installs the real MCP clients that the `chela mcp serve` tests drive, pinned, into
# target/mcp-serve-peers (or $1): the official Python SDK (`mcp` from PyPI, in a venv) and the
# TypeScript SDK (`@modelcontextprotocol/sdk` from npm). Does nothing when both are there.
# Needs python3 with venv and node/npm; scripts/test.sh and .ci/run install those from Debian.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-target/mcp-serve-peers}
PY_MCP=2.3.0
TS_SDK=1.32.2
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
if [ "$(cat "$dir/node/node_modules/@modelcontextprotocol/sdk/package.json" 2>/dev/null | grep -o "\"version\": \"$TS_SDK\"")" = "" ]; then
  mkdir -p "$dir/node"
  (cd "$dir/node" && [ -f package.json ] || echo '{"name":"chela-mcp-serve-peers","private":true}' >package.json)
  (cd "$dir/node" && npm install --silent --no-audit --no-fund "@modelcontextprotocol/sdk@$TS_SDK" >/dev/null)
fi
# ESM resolves packages beside the script, so the TypeScript client runs from there.
cp tests/mcp-serve/client.mjs "$dir/node/client.mjs"
echo "$dir"
