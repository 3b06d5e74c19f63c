#!/usr/bin/env bash
# Build the static `chela` (x86_64-unknown-linux-musl, no shared libraries at all) on a machine
# whose rustup has no musl target, from Debian's packages:
#
#   scripts/build-static.sh [PROFILE]        (default release-small; prints the binary's path)
#
# Needs Debian's `rustc-web` and `rust-web-src` (a rustc with the standard library's sources, so
# `-Zbuild-std` compiles std for musl), `musl-tools` (musl-gcc, musl's libc.a, for the link and
# for SQLite's, Lua's and ring's C), `libunwind-16-dev` (the unwinder std links) and an `ld.lld`
# (rustup's bundled one, or Debian's `lld-16`) for the start-up ordering of crates/chela/build.rs.
#
# The binary is linked at a fixed address (`-C relocation-model=static`, not a static-PIE):
# Debian's musl-gcc starts every program with `Scrt1.o`, which does not relocate a static-PIE,
# and musl 1.2.3 does not read packed relocations. A fixed address also means the read-only
# data that holds pointers (`.data.rel.ro`: vtables, string tables) needs no relocating at
# start, so it stays clean file pages instead of 0.25 MiB of private copies. The price: the
# program's own code and data are not placed at a random address (the stack, heap and thread
# stacks still are).
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${1:-release-small}
target=x86_64-unknown-linux-musl
fail() { echo "build-static: $*" >&2; exit 1; }
[ -x /usr/bin/rustc ] && [ -x /usr/bin/cargo ] || fail "Debian's rustc is needed: apt-get install rustc-web"
[ -d /usr/lib/rustlib/src/rust/library ] || fail "the Rust sources for build-std are missing: apt-get install rust-web-src"
command -v musl-gcc >/dev/null || fail "musl-gcc is needed: apt-get install musl-tools"
dir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
# An `ld.lld` in a folder of its own, for `-B`: rustup's wrapper if there is one, else Debian's.
lld_dir="$dir/static-ld"
mkdir -p "$lld_dir"
if [ -z "${CHELA_GCC_LD:-}" ]; then
  sysroot=$(rustc --print sysroot 2>/dev/null || true)
  host_ld="$sysroot/lib/rustlib/x86_64-unknown-linux-gnu/bin/gcc-ld"
  if [ -n "$sysroot" ] && [ -x "$host_ld/ld.lld" ] && [ "$sysroot" != /usr ]; then
    export CHELA_GCC_LD=$host_ld
  elif lld=$(command -v ld.lld || command -v ld.lld-16 || command -v ld.lld-15); then
    ln -sf "$lld" "$lld_dir/ld.lld"
    export CHELA_GCC_LD=$lld_dir
  else
    echo "build-static: no ld.lld (apt-get install lld-16): linking without the start-up ordering" >&2
  fi
fi
# Rust's std for musl links `-lunwind`, which a rustup musl target carries itself. Here it is
# LLVM's (Debian `libunwind-16-dev`), built for glibc: its one glibc-only call, the fortified
# `__fprintf_chk` of its debug log, gets a plain `vfprintf` for musl. (gcc's libgcc_eh.a needs
# glibc's `_dl_find_object` to find unwind tables, which musl lacks.)
llvm_unwind=$(ls /usr/lib/llvm-1[4-9]/lib/libunwind.a 2>/dev/null | tail -1)
[ -n "$llvm_unwind" ] || fail "LLVM's libunwind.a is needed: apt-get install libunwind-16-dev"
printf '#include <stdarg.h>\n#include <stdio.h>\nint __fprintf_chk(FILE *f, int flag, const char *fmt, ...) {\n  va_list ap; va_start(ap, fmt); int n = vfprintf(f, fmt, ap); va_end(ap); (void)flag; return n;\n}\n' >"$lld_dir/fprintf_chk.c"
musl-gcc -O2 -c "$lld_dir/fprintf_chk.c" -o "$lld_dir/fprintf_chk.o"
cp "$llvm_unwind" "$lld_dir/libunwind.a.new"
ar q "$lld_dir/libunwind.a.new" "$lld_dir/fprintf_chk.o"
mv -f "$lld_dir/libunwind.a.new" "$lld_dir/libunwind.a"
export CHELA_LINK_SEARCH=$lld_dir
export RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_LINKER=musl-gcc
export CC_x86_64_unknown_linux_musl=musl-gcc
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="-C link-self-contained=no -C relocation-model=static -C target-feature=+crt-static"
# release-small is stripped, aborts on panic and has no unwinding tables (crates/chela/build/small.rs):
# a backtrace there never got past its first frame, unnamed. So its std leaves out the symbolizer
# (std's `backtrace` feature: gimli, addr2line, rustc-demangle, miniz_oxide; 125,472 B of the
# binary); a panic still prints its message and where it happened. Other profiles keep it.
std_features=()
[ "$profile" = release-small ] && std_features=(-Zbuild-std-features=panic-unwind)
/usr/bin/cargo build --locked -Zbuild-std=std,panic_abort "${std_features[@]}" --target "$target" --profile "$profile" -p chela --bin chela >&2
echo "$dir/$target/$profile/chela"
