#!/usr/bin/env bash
# Installs the Python `websockets` library (PyPI, pinned) into a venv in DEST (default
# target/mimiclaw-peer) for tests/mimiclaw/client.py, a MimiClaw WebSocket client written from
# MimiClaw's own documentation. Does nothing when the pinned version is there; takes a lock so
# tests in parallel install once. Prints DEST.
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:-target/mimiclaw-peer}
WEBSOCKETS=15.0.1
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
exec 9>"$dest/.lock"
flock 9
if ! "$dest/venv/bin/python" -c "import importlib.metadata as m; assert m.version('websockets') == '$WEBSOCKETS'" 2>/dev/null; then
  python3 -m venv "$dest/venv"
  "$dest/venv/bin/pip" install --quiet --disable-pip-version-check "websockets==$WEBSOCKETS"
fi
echo "$dest"
