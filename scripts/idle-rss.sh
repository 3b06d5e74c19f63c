#!/usr/bin/env bash
# Idle RSS of `chela run` with the gateway and Telegram started, and what its pages are.
#
#   scripts/idle-rss.sh [[VAR=VALUE,...@]BIN ...]      (default: target/release-small/chela)
#
# `CHELA_DAEMON__TRIM_IDLE_SECS=0@BIN` runs BIN with that setting from the environment, so one
# binary with and without a setting is compared in one interleaved run.
#
# For each binary, ROUNDS times (default 3, the binaries alternated): a fresh workspace, one
# start to write its default files, then `chela run` again; after IDLE seconds (default 1.2;
# IDLE=10 is the "10 s after ready" of the idle target) it prints VmRSS
# and the parts from /proc/PID/smaps_rollup and smaps: anonymous memory, the binary's own file
# pages, and the shared libraries' file pages (a page counts once). Telegram is a stand-in on 127.0.0.1 (python3) that
# answers getMe and holds getUpdates for 2 s, as a long poll does. The model is never called.
# Each binary is evicted from the page cache first (fsync + POSIX_FADV_DONTNEED), so a freshly
# copied file (dirty pages) and an old one are read back alike. Loopback only.
# MAX_KIB=N: exit 1 when a binary's median VmRSS is above N KiB (CI's check that the start-up
# ordering list still does its job: a stale list shows as resident code, see .ci/run).
set -euo pipefail
[ $# -gt 0 ] || set -- "${CARGO_TARGET_DIR:-target}/release-small/chela"
ROUNDS=${ROUNDS:-3}
IDLE=${IDLE:-1.2}
work=$(mktemp -d)
tg_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
gw_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 "$(dirname "$0")/telegram-standin.py" "$tg_port" & tg=$!
trap 'kill $tg 2>/dev/null; rm -rf "$work"' EXIT
bin_of() { echo "${1##*@}"; }
env_of() { case $1 in *@*) echo "${1%@*}" | tr , ' ' ;; esac; }
for b in "$@"; do
  b=$(bin_of "$b")
  python3 -c 'import os,sys; fd=os.open(sys.argv[1],os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)' "$b"
done
kib() { awk -v k="$1" '$1==k {print $2}' "$2"; }
for round in $(seq "$ROUNDS"); do
  i=0
  for arg in "$@"; do
    i=$((i + 1)); b=$(bin_of "$arg")
    home="$work/home-$round-$i"; mkdir -p "$home"
    printf '[llm]\nprovider = "openai"\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "x"\nmodel = "m"\n[channels.telegram]\ntoken = "123:abc"\napi_base = "http://127.0.0.1:%s"\n' "$tg_port" > "$home/chela.toml"
    for pass in first measured; do
      # shellcheck disable=SC2046 # one word per VAR=VALUE
      env -i HOME="$home" CHELA_HOME="$home" CHELA_GATEWAY__LISTEN="127.0.0.1:$gw_port" $(env_of "$arg") "$b" run 2>"$home/log" & pid=$!
      if [ $pass = measured ]; then sleep "$IDLE"; else sleep 1.2; fi
      if [ $pass = measured ]; then
        cp "/proc/$pid/smaps_rollup" "$work/rollup"; cp "/proc/$pid/status" "$work/status"
        # File pages only: a mapping's Rss less its anonymous (copied-on-write) pages.
        own=$(awk -v f="$(readlink -f "$b")" '/^[0-9a-f]+-/{m=($6==f)} m&&/^Rss:/{s+=$2} m&&/^Anonymous:/{s-=$2} END{print s+0}' "/proc/$pid/smaps")
        libs=$(awk '/^[0-9a-f]+-/{m=($6 ~ /\.so/)} m&&/^Rss:/{s+=$2} m&&/^Anonymous:/{s-=$2} END{print s+0}' "/proc/$pid/smaps")
        echo "$arg $(kib VmRSS: "$work/status")" >>"$work/vmrss"
        printf '%s round %s: VmRSS %s KiB = anonymous %s + binary %s + libraries %s (file pages); threads %s\n' \
          "$arg" "$round" "$(kib VmRSS: "$work/status")" "$(kib Anonymous: "$work/rollup")" "$own" "$libs" "$(kib Threads: "$work/status")"
      fi
      kill "$pid"; wait "$pid" 2>/dev/null || true
    done
  done
done
[ -n "${MAX_KIB:-}" ] || exit 0
over=0
for b in "$@"; do
  median=$(awk -v b="$b" '$1==b {print $2}' "$work/vmrss" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
  if [ "$median" -gt "$MAX_KIB" ]; then
    echo "$b: median idle VmRSS $median KiB, above $MAX_KIB KiB" >&2; over=1
  else
    echo "$b: median idle VmRSS $median KiB (at most $MAX_KIB)"
  fi
done
exit $over
