#!/usr/bin/env bash
# The emulator turn: builds firmware/qemu if needed and runs it on
# `qemu-system-riscv32 -machine virt -m 536K`. Prints the firmware's UART output; exits 0 and
# ends with `chela-qemu: turn ok` only when every turn completed and every check passed,
# non-zero with the reason otherwise. Then prints the web_search turn's heap peak and the heap the
# core holds at idle after start-up, and fails if that leaves under 100 KiB of heap and stack free
# on the least heap + stack firmware/build.sh lets through. Bounded: the build by 15 min, the run by 30 s
# (CHELA_BUILD_TIMEOUT and CHELA_QEMU_TIMEOUT override them). `firmware/qemu/run.sh --build-only` stops after the
# build (CI builds it in the background and runs the turn later, when the machine is quieter).
#
# Needs Debian's rustc-web, rust-web-src, lld-16 and qemu-system-misc (see .ci/run).
set -euo pipefail
cd "$(dirname "$0")"

fail() {
  echo "chela-qemu: FAILED: $*" >&2
  exit 1
}

for tool in /usr/bin/rustc ld.lld-16 qemu-system-riscv32; do
  command -v "$tool" >/dev/null ||
    fail "$tool is missing: apt-get install rustc-web cargo-web rust-web-src lld-16 qemu-system-misc"
done
[ -d /usr/lib/rustlib/src/rust/library ] || fail "the Rust sources for build-std are missing: apt-get install rust-web-src"

# Debian's compiler has rust-src for build-std; rustup's toolchains here do not. Any cargo
# works with it; Debian's is used when present so that PATH's rustup proxies stay out of it.
export RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1
cargo=cargo
[ -x /usr/bin/cargo ] && cargo=/usr/bin/cargo
timeout "${CHELA_BUILD_TIMEOUT:-900}" "$cargo" build --release --locked --quiet || fail "the build failed (status $?)"
elf=target/riscv32imc-unknown-none-elf/release/chela-qemu
[ "${1:-}" = --build-only ] && exit 0

log=$(mktemp)
trap 'rm -f "$log"' EXIT
# rv32 without the A, F and D extensions: the ESP32-C3's rv32imc. No BIOS: the ELF is loaded at
# the start of RAM and entered there. No monitor and no stdin, so nothing can wait for input.
status=0
timeout --kill-after=5 "${CHELA_QEMU_TIMEOUT:-30}" qemu-system-riscv32 \
  -machine virt -cpu rv32,a=false,f=false,d=false -m 536K -bios none \
  -display none -monitor none -serial stdio -kernel "$elf" </dev/null >"$log" 2>&1 || status=$?
cat "$log"
case $status in
  0) ;;
  124 | 137) fail "no result within ${CHELA_QEMU_TIMEOUT:-30} s (QEMU was stopped)" ;;
  *) fail "QEMU exited with status $status" ;;
esac
grep -q '^chela-qemu: turn ok' "$log" || fail "QEMU exited 0 but the firmware did not say the turn was ok"

# The chip's heap at idle: what the core holds after start-up (settings, the console; the
# emulator's allocator counts it) comes out of the chip's heap. firmware/build.sh lets no image
# leave under 120 KiB for heap and stack, so with this much held at idle every image it passes
# still has at least 100 KiB of heap and stack free. Not seen here: the radio's buffers, which
# esp-radio takes from the heap at run time (docs/BENCHMARKS.md).
idle=$(sed -n 's/^chela-qemu: idle after start-up \([0-9]*\) B held on the heap.*/\1/p' "$log")
search=$(sed -n 's/^chela-qemu: web_search turn heap peak \([0-9]*\) B in all.*/\1/p' "$log")
[ -n "$idle" ] && [ -n "$search" ] || fail "the firmware did not print its idle heap and web_search heap figures"
floor=$((120 * 1024))
echo "chela-qemu: idle heap held $idle B; web_search turn heap peak $search B"
echo "chela-qemu: idle heap + stack free on the chip >= $((floor - idle)) B (the least firmware/build.sh lets through, $floor B, less $idle B)"
[ $((floor - idle)) -ge $((100 * 1024)) ] ||
  fail "idle heap + stack free would be $((floor - idle)) B on an image with the least heap and stack firmware/build.sh allows, under 100 KiB"
# For firmware/build.sh, which gives each chip's own figure from it.
echo "$idle" >target/idle-heap-bytes
