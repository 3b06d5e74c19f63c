#!/usr/bin/env bash
# Installs the real OpenAI clients that the OpenAI-compatible endpoint's interop tests drive,
# pinned, into target/openai-peers (or $1): the official Python SDK (`openai` from PyPI) and
# litellm, in one venv. Does nothing when both are there.
# Needs python3 with venv; scripts/test.sh and .ci/run install it from Debian.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-target/openai-peers}
OPENAI=3.63.0
LITELLM=1.110.2
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# Tests in parallel processes (nextest runs each test in its own) call this at once: one
# installs while the others wait here, then find the clients installed.
exec 9>"$dir/.lock"
flock 9
if ! "$dir/venv/bin/python" -c "import importlib.metadata as m; assert m.version('openai') == '$OPENAI' and m.version('litellm') == '$LITELLM'" 2>/dev/null; then
  python3 -m venv "$dir/venv"
  "$dir/venv/bin/pip" install --quiet --disable-pip-version-check "openai==$OPENAI" "litellm==$LITELLM"
fi
echo "$dir"
