#!/usr/bin/env bash
# The emulator turn: builds firmware/qemu if needed and runs it on
# `qemu-system-riscv32 -machine virt -m 536K`. Prints the firmware's UART output; exits 0 and
# ends with `chela-qemu: turn ok` only when every turn completed and every check passed,
# non-zero with the reason otherwise. Bounded: the build by 15 min, the run by 30 s
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
