#!/usr/bin/env bash
# Bytes each default feature adds to the `release-small` binary (stripped, glibc unless a
# --target is given in EXTRA).
#
#   scripts/size-by-feature.sh [FEATURE ...]   (default: every default feature of crates/chela)
#
# Builds `chela` with `--no-default-features`, then each feature alone, then all of them (the
# default build), one after the other (fat LTO: several minutes each), keeps each binary in
# OUT (default target/size-by-feature/) and prints a markdown table: the size, what the
# feature adds to the build without features, and for `all` what the features add together
# against the sum of their separate growths (shared dependencies count once there). `lua`
# switches `files` on, so its row is also given over `files` alone. EXTRA (default empty) is
# passed to every `cargo build`; CARGO_PROFILE_RELEASE_SMALL_LTO=thin gives quicker, rougher
# figures.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL=0
out=${OUT:-${CARGO_TARGET_DIR:-target}/size-by-feature}
mkdir -p "$out"
if [ $# -eq 0 ]; then
  # The `default = [...]` line of the binary's manifest.
  read -r -a features <<<"$(sed -n 's/^default *= *\[\(.*\)\]/\1/p' crates/chela/Cargo.toml | tr -d '",')"
else
  features=("$@")
fi
build() { # NAME ARGS...: build, keep the binary as OUT/NAME, print its size
  local name=$1
  shift
  # shellcheck disable=SC2086
  cargo build --locked --quiet --profile release-small -p chela --bin chela $EXTRA "$@" >&2
  local bin=${CARGO_TARGET_DIR:-target}/release-small/chela
  for t in $EXTRA; do [[ $t == --target=* ]] && bin=${CARGO_TARGET_DIR:-target}/${t#--target=}/release-small/chela; done
  cp "$bin" "$out/$name"
  stat -c %s "$out/$name"
}
EXTRA=${EXTRA:-}
declare -A size
size[none]=$(build none --no-default-features)
for f in "${features[@]}"; do
  size[$f]=$(build "$f" --no-default-features --features "$f")
done
all_list=$(IFS=,; echo "${features[*]}")
size[all]=$(build all --no-default-features --features "$all_list")
printf '| build | bytes | adds over none |\n|---|---|---|\n'
printf '| none | %s | |\n' "${size[none]}"
sum=0
for f in "${features[@]}"; do
  add=$((size[$f] - size[none]))
  sum=$((sum + add))
  note=""
  if [ "$f" = lua ] && [ -n "${size[files]:-}" ]; then note=" ($((size[lua] - size[files])) over files)"; fi
  printf '| %s | %s | +%s%s |\n' "$f" "${size[$f]}" "$add" "$note"
done
printf '| all (%s) | %s | +%s (sum of the rows: +%s) |\n' "$all_list" "${size[all]}" "$((size[all] - size[none]))" "$sum"
