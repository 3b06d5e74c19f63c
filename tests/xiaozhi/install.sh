#!/usr/bin/env bash
# Installs the xiaozhi device simulator (PyPI xiaozhi-sdk, pinned in requirements.txt) into a venv
# in DEST (default target/xiaozhi-peer) once. The tests call this themselves; it takes a lock so
# tests in parallel install once, and a stamp so later runs return at once.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="${1:-$here/../../target/xiaozhi-peer}"
mkdir -p "$dest"
dest="$(cd "$dest" && pwd)"
exec 9>"$dest/.lock"
flock 9
stamp="$dest/.stamp"
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
started=$(date +%s)
if [ ! -x "$dest/venv/bin/python" ]; then
  python3 -m venv "$dest/venv"
fi
"$dest/venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt"
# Headless: the SDK's package imports without an audio device (its CLI's sounddevice is not loaded).
"$dest/venv/bin/python" -c 'from xiaozhi_sdk import XiaoZhiWebsocket'
echo "$want" >"$stamp"
echo "xiaozhi-sdk installed in $dest in $(( $(date +%s) - started ))s" >&2
