#!/usr/bin/env bash
# Regenerate crates/chela/startup-order.txt: the functions `chela run` executes from exec until
# it idles with the gateway and Telegram, for the linker to place together (see
# crates/chela/build.rs and docs/BENCHMARKS.md, "Start-up code ordered at link time").
#
#   scripts/startup-order.sh              (builds for this machine's glibc, traces, writes its section)
#   scripts/startup-order.sh --musl       (the same with the static musl build of scripts/build-static.sh)
#   scripts/startup-order.sh BIN MAP      (traces BIN, linked with lld's map MAP; no build)
#
# The list has one section per C library: a run replaces the section of the libc it traced and
# keeps the other whole, so both runs, in either order, make the list for both builds.
#
# 1. Builds the release binary (`--profile release-small`, for the machine, or with --musl the
#    static one of scripts/build-static.sh) with lld's link map beside it (CHELA_LINK_MAP).
# 2. Runs it twice under valgrind's lackey tool, which logs every block of code executed: a
#    first start in a fresh workspace (writes the default files), then the start that the idle
#    measurement (scripts/idle-rss.sh) measures; each is left IDLE seconds (default 20) to idle
#    (Telegram's stand-in holds getUpdates 2 s, so the poll loop runs a few times) and then
#    killed. Under valgrind the daemon runs ~50 times slower: on a loaded machine it may not
#    reach its start-up trim in that time, and step 3 then fails; run again with a larger IDLE.
# 3. scripts/startup-order.py maps the executed addresses to the linker's input sections and
#    writes one name per section, first those executed after the daemon's start-up trim (what
#    comes back after it), then the rest, in the order first executed, without rustc's hashes: one list
#    serves both release profiles; the section of the libc traced is replaced.
#
# Run it after changes that move start-up code (a new subsystem started by `chela run`, a module
# renamed or moved between crates). CI fails when under 98 % of the names are found in the
# release-small link map (`scripts/startup-order.py --check`) or that build's idle RSS is over
# 4.0 MiB (`MAX_KIB=4096 scripts/idle-rss.sh`). A stale list is safe: the linker
# skips names it does not find and the rest of the code keeps its usual place; only the idle
# RSS grows back. Needs valgrind (Debian `valgrind`) and python3; --musl also what
# scripts/build-static.sh needs (Debian `rustc-web`, `rust-web-src`, `musl-tools`,
# `libunwind-16-dev`, `lld-16`). Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
musl=""
if [ "${1:-}" = --musl ]; then
  musl=1
  shift
fi
dir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
work=$(mktemp -d)
map="$dir/startup-order/chela${musl:+-musl}.map"
mkdir -p "$(dirname "$map")"
command -v valgrind >/dev/null || { echo "startup-order: valgrind is needed (apt-get install valgrind)" >&2; exit 1; }

if [ $# -eq 2 ]; then
  bin=$1
  map=$2
elif [ -n "$musl" ]; then
  echo "=== build: CHELA_LINK_MAP=$map scripts/build-static.sh release-small"
  bin=$(CHELA_LINK_MAP="$map" scripts/build-static.sh release-small)
else
  echo "=== build: CHELA_LINK_MAP=$map cargo build --profile release-small -p chela --bin chela"
  CHELA_LINK_MAP="$map" cargo build --locked --profile release-small -p chela --bin chela
  bin="$dir/release-small/chela"
fi
[ -s "$map" ] || { echo "startup-order: the build wrote no link map at $map" >&2; exit 1; }

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
tg_port=$(port)
gw_port=$(port)
python3 scripts/telegram-standin.py "$tg_port" & tg=$!
trap 'kill $tg 2>/dev/null; rm -rf "$work"' EXIT
home="$work/home"
mkdir -p "$home"
printf '[llm]\nprovider = "openai"\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "x"\nmodel = "m"\n[channels.telegram]\ntoken = "123:abc"\napi_base = "http://127.0.0.1:%s"\n' "$tg_port" > "$home/chela.toml"
for pass in first second; do
  echo "=== trace: chela run under valgrind --tool=lackey ($pass start)"
  # `-v -v` makes valgrind log where it loaded the binary: a dynamic one starts in ld.so, so the
  # first block executed does not give its address.
  # `--vex-guest-chase=no`: by default valgrind follows a direct call into its callee within one
  # superblock, so a small function is never the start of one and the trace misses it. At
  # opt-level "z" many small helpers (`RawVec::drop` and the like) stay out of line: missed, they
  # were left scattered through `.text` and the idle daemon came back to ~0.9 MiB of their pages.
  env -i HOME="$home" CHELA_HOME="$home" CHELA_GATEWAY__LISTEN="127.0.0.1:$gw_port" \
    valgrind -v -v --tool=lackey --trace-superblocks=yes --vex-guest-chase=no --log-file="$work/trace-$pass" \
    "$bin" run 2>"$work/log-$pass" & pid=$!
  sleep "${IDLE:-20}"
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "startup-order: chela run exited early:" >&2
    cat "$work/log-$pass" >&2
    exit 1
  fi
  # SIGKILL, not SIGTERM: the shutdown path is not start-up code.
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null || true
done
python3 scripts/startup-order.py "$map" "$bin" crates/chela/startup-order.txt "$work/trace-first" "$work/trace-second"
echo "wrote crates/chela/startup-order.txt; rebuild the release binary to use it"
