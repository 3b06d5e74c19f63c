#!/usr/bin/env bash
# The web page's tests in a real browser (tests/browser): installs what is missing (Debian's
# Chromium, the pinned playwright-core from package-lock.json), builds `chela`, the fake LLM and
# the fake Telegram, runs the tests and prints how long they took. Every wait inside has a deadline; the whole run is
# also capped, so it always ends by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo

need=()
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || need+=(chromium)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
if ((${#need[@]})); then
  echo "installing from Debian: ${need[*]}"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  echo "the browser test needs Node.js 20 or newer (playwright-core 1.65); this is $(node --version)" >&2
  exit 1
fi

# Exactly the versions in package-lock.json (one package, a few seconds).
(cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)

cargo build -q -p chela --bin chela -p chela-testkit --bin chela-fake-llm --bin chela-fake-telegram

status=0
CHELA_BIN="$PWD/target/debug/chela" FAKE_LLM_BIN="$PWD/target/debug/chela-fake-llm" \
  FAKE_TELEGRAM_BIN="$PWD/target/debug/chela-fake-telegram" \
  timeout --kill-after=10 300 node --test --test-reporter=spec tests/browser/page.test.mjs tests/browser/console.test.mjs tests/browser/memory.test.mjs || status=$?
echo "browser test took $(( $(date +%s) - started ))s (status $status)"
exit "$status"
