#!/usr/bin/env bash
# Idle RSS of `chela run` with the gateway and Telegram started, and what its pages are.
#
#   scripts/idle-rss.sh [BIN ...]      (default: target/release-small/chela)
#
# For each binary, ROUNDS times (default 3, the binaries alternated): a fresh workspace, one
# start to write its default files, then `chela run` again; after IDLE seconds (default 1.2;
# IDLE=10 is the "10 s after ready" of the idle target) it prints VmRSS
# and the parts from /proc/PID/smaps_rollup and smaps: anonymous memory, the binary's own file
# pages, and the shared libraries' file pages (a page counts once). Telegram is a stand-in on 127.0.0.1 (python3) that
# answers getMe and holds getUpdates for 2 s, as a long poll does. The model is never called.
# Each binary is evicted from the page cache first (fsync + POSIX_FADV_DONTNEED), so a freshly
# copied file (dirty pages) and an old one are read back alike. Loopback only.
set -euo pipefail
[ $# -gt 0 ] || set -- "${CARGO_TARGET_DIR:-target}/release-small/chela"
ROUNDS=${ROUNDS:-3}
IDLE=${IDLE:-1.2}
work=$(mktemp -d)
tg_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
gw_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 "$(dirname "$0")/telegram-standin.py" "$tg_port" & tg=$!
trap 'kill $tg 2>/dev/null; rm -rf "$work"' EXIT
for b in "$@"; do
  python3 -c 'import os,sys; fd=os.open(sys.argv[1],os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)' "$b"
done
kib() { awk -v k="$1" '$1==k {print $2}' "$2"; }
for round in $(seq "$ROUNDS"); do
  for b in "$@"; do
    home="$work/home-$round-$(basename "$b")"; mkdir -p "$home"
    printf '[llm]\nprovider = "openai"\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "x"\nmodel = "m"\n[channels.telegram]\ntoken = "123:abc"\napi_base = "http://127.0.0.1:%s"\n' "$tg_port" > "$home/chela.toml"
    for pass in first measured; do
      env -i HOME="$home" CHELA_HOME="$home" CHELA_GATEWAY__LISTEN="127.0.0.1:$gw_port" "$b" run 2>"$home/log" & pid=$!
      if [ $pass = measured ]; then sleep "$IDLE"; else sleep 1.2; fi
      if [ $pass = measured ]; then
        cp "/proc/$pid/smaps_rollup" "$work/rollup"; cp "/proc/$pid/status" "$work/status"
        # File pages only: a mapping's Rss less its anonymous (copied-on-write) pages.
        own=$(awk -v f="$(readlink -f "$b")" '/^[0-9a-f]+-/{m=($6==f)} m&&/^Rss:/{s+=$2} m&&/^Anonymous:/{s-=$2} END{print s+0}' "/proc/$pid/smaps")
        libs=$(awk '/^[0-9a-f]+-/{m=($6 ~ /\.so/)} m&&/^Rss:/{s+=$2} m&&/^Anonymous:/{s-=$2} END{print s+0}' "/proc/$pid/smaps")
        printf '%s round %s: VmRSS %s KiB = anonymous %s + binary %s + libraries %s (file pages); threads %s\n' \
          "$b" "$round" "$(kib VmRSS: "$work/status")" "$(kib Anonymous: "$work/rollup")" "$own" "$libs" "$(kib Threads: "$work/status")"
      fi
      kill "$pid"; wait "$pid" 2>/dev/null || true
    done
  done
done
