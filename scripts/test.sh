#!/usr/bin/env bash
# Runs every test of the workspace under cargo-nextest (each test in its own process, with a
# per-test time bound and a report of the slow ones; settings in .config/nextest.toml), then the
# examples in the docs, which nextest does not run. Arguments go to `cargo nextest run`
# (a filter, `-p chela`, `--profile ci`); with arguments the doc examples are left out.
# cargo-nextest is installed from crates.io (pinned) when it is missing: scripts/install-nextest.sh.
#
# The proxy tests use real proxies from Debian (tinyproxy for HTTP CONNECT, microsocks for
# SOCKS5), and the line-editor test a real terminal (tmux); this installs them first when they
# are missing. The gateway's OpenAI test runs the official `openai`
# Python SDK from a venv it makes under target/ (`pip install openai`), so python3 with venv is
# needed too.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
for bin in tinyproxy microsocks tmux; do
  command -v "$bin" >/dev/null 2>&1 || need+=("$bin")
done
# The MCP server's tests drive the official TypeScript SDK client (tests/mcp-serve/install.sh).
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
command -v python3 >/dev/null 2>&1 || need+=(python3)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
# The voice pipeline speaks (and is tested) with espeak-ng; its Opus codec is pure Rust.
command -v espeak-ng >/dev/null 2>&1 || need+=(espeak-ng)
# The xiaozhi device simulator (PyPI xiaozhi-sdk, via opuslib) decodes Chela's audio with the
# system's libopus: a test peer only, checking that our packets play on real devices' codec.
/sbin/ldconfig -p 2>/dev/null | grep -q 'libopus\.so\.0' || need+=(libopus0)
if ((${#need[@]})); then
  echo "installing test peers from Debian: ${need[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
scripts/install-nextest.sh
cargo nextest run --workspace "$@"
if (($# == 0)); then
  cargo test --doc --workspace
fi
