#!/usr/bin/env bash
# Installs the xiaozhi device simulators (PyPI xiaozhi-sdk for WebSocket; paho-mqtt, cryptography
# and opuslib for MQTT + UDP; all pinned in requirements.txt) into a venv
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
"$dest/venv/bin/python" -c 'import paho.mqtt.client, opuslib; from cryptography.hazmat.primitives.ciphers import Cipher'
echo "$want" >"$stamp"
echo "xiaozhi device simulators installed in $dest in $(( $(date +%s) - started ))s" >&2
