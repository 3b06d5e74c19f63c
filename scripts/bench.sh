#!/usr/bin/env bash
# Builds the release-small binary and runs every benchmark, printing the figures that
# docs/BENCHMARKS.md records. Honours CARGO_TARGET_DIR. Takes a few minutes; the machine should
# be otherwise idle, and figures are only compared within one run.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$PWD/$target" ;; esac

echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "rustc: $(rustc --version)"
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"

echo; echo "=== build: cargo build --profile release-small -p chela"
cargo build --profile release-small -p chela

echo; echo "=== 1. host time of one agent turn: cargo bench -p chela-core --bench turn"
cargo bench -p chela-core --bench turn

echo; echo "=== 2. peak heap of one turn: cargo bench -p chela-core --bench heap"
cargo bench -p chela-core --bench heap

echo; echo "=== 6. memory recall at 1k/10k/100k entries: cargo bench -p chela-core --bench recall"
cargo bench -p chela-core --bench recall

echo; echo "=== 5. system prompt build: cargo bench -p chela --bench prompt"
cargo bench -p chela --bench prompt

echo; echo "=== 6. HTTP keep-alive: cargo bench -p chela --bench http"
cargo bench -p chela --bench http

echo; echo "=== 3 and 4. the whole program, binary size, request size: cargo bench -p chela --bench e2e"
CHELA_BIN="$target/release-small/chela" cargo bench -p chela --bench e2e
