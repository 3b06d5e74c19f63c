#!/usr/bin/env bash
# Builds every fuzz target and runs each for a bounded time; a crash stops with a non-zero
# status and leaves the input in fuzz/artifacts/<target>/.
#   fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]
#   fuzz/run.sh --build-only      (builds every target, runs none)
# CHELA_FUZZ_QUICK=1 builds for a short smoke run (CI): cargo-fuzz's dev build at opt-level 1,
# without debug info and with rustc's parallel codegen, takes about a fifth less CPU than its
# release build (one codegen unit, line tables) and 40 % less time, for about half the inputs per
# second.
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked --version 0.13.2`) and a C++ compiler.
# The stable toolchain accepts cargo-fuzz's nightly flags with RUSTC_BOOTSTRAP=1. No sanitizer
# (`-s none`): the crates forbid unsafe code, and the time goes to more inputs instead.
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-15}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && mapfile -t targets < <(cargo fuzz list)
export RUSTC_BOOTSTRAP=1 CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
mode=()
if [ -n "${CHELA_FUZZ_QUICK:-}" ]; then
  mode=(--dev)
  export CARGO_PROFILE_DEV_OPT_LEVEL=1 CARGO_PROFILE_DEV_DEBUG=0
fi
built=$(date +%s)
cargo fuzz build -s none "${mode[@]}"
echo "fuzz targets built in $(( $(date +%s) - built ))s"
# Every target starts from checked-in seeds (libFuzzer refuses a missing corpus directory).
for t in "${targets[@]}"; do
  [ -n "$(ls -A "seeds/$t" 2>/dev/null)" ] || { echo "fuzz target $t has no seeds: add inputs under fuzz/seeds/$t/" >&2; exit 1; }
done
[ "$secs" = --build-only ] && exit 0
# Real provider bodies recorded by other projects, read in place when shared/ is beside the
# clone (never copied into the repository).
wire="../../shared/wire-corpus/bodies"
work="$(mktemp -d "${TMPDIR:-/tmp}/chela-fuzz.XXXXXX")"
for t in "${targets[@]}"; do
  extra=()
  case "$t" in
    sse | anthropic_* | openai_*) [ -d "$wire" ] && extra+=("$wire") ;;
  esac
  # New inputs go to a scratch directory (the first one given), so the checked-in seeds stay small.
  mkdir -p "$work/$t"
  start=$(date +%s)
  if ! cargo fuzz run -s none "${mode[@]}" "$t" "$work/$t" "seeds/$t" "${extra[@]}" -- \
    -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 \
    >"$work/$t.log" 2>&1; then
    tail -40 "$work/$t.log" >&2
    echo "fuzz target $t failed; the input is in fuzz/artifacts/$t/ (log: $work/$t.log)" >&2
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log")
  echo "fuzz $t: ${runs:-?} inputs in $(( $(date +%s) - start ))s, no crash"
done
rm -rf "$work"
