#!/usr/bin/env bash
# Installs the MCP test peers into DEST (default target/mcp-peers) once: a Python venv with the
# official SDK (`mcp` 2.x) and mcp-server-time, and npm's server-everything from package-lock.json.
# The tests call this themselves; a second run finds the stamp and returns at once.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# `--endpoint DEST`: only the MCP endpoint's peer (mcp2xiaozhi), in its own venv in DEST.
if [ "${1:-}" = "--endpoint" ]; then
  dest="${2:?install-peers.sh --endpoint DEST}"
  mkdir -p "$dest"
  exec 9>"$dest/.lock"
  flock 9
  want="$(sha256sum <"$here/endpoint-requirements.txt" | cut -d' ' -f1)"
  if [ -f "$dest/.stamp" ] && [ "$(cat "$dest/.stamp")" = "$want" ]; then
    exit 0
  fi
  started=$(date +%s)
  [ -x "$dest/venv/bin/pip" ] || python3 -m venv "$dest/venv"
  "$dest/venv/bin/pip" install -q --disable-pip-version-check -r "$here/endpoint-requirements.txt"
  echo "$want" >"$dest/.stamp"
  echo "MCP endpoint peer installed in $dest in $(( $(date +%s) - started ))s" >&2
  exit 0
fi
dest="${1:-$here/../../target/mcp-peers}"
mkdir -p "$dest"
dest="$(cd "$dest" && pwd)"
exec 9>"$dest/.lock"
flock 9
stamp="$dest/.stamp"
want="$({ cat "$here/requirements.txt" "$here/package.json"; cat "$here/package-lock.json" 2>/dev/null || true; } | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
started=$(date +%s)
if [ ! -x "$dest/venv/bin/python" ]; then
  python3 -m venv "$dest/venv"
fi
"$dest/venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt"
cp "$here/package.json" "$dest/"
if [ -f "$here/package-lock.json" ]; then
  cp "$here/package-lock.json" "$dest/"
  (cd "$dest" && npm ci --silent --no-audit --no-fund)
else
  (cd "$dest" && npm install --silent --no-audit --no-fund && cp package-lock.json "$here/")
fi
echo "$want" >"$stamp"
echo "MCP test peers installed in $dest in $(( $(date +%s) - started ))s" >&2
