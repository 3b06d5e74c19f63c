#!/usr/bin/env python3
"""Bytes of `.text` per crate (Rust) or per archive (C), from lld's link map of a binary.

    python3 scripts/text-by-crate.py MAP [N]

MAP is the map `CHELA_LINK_MAP=PATH cargo build --profile release-small --target
x86_64-unknown-linux-musl -p chela --bin chela` writes (crates/chela/build.rs; mangled names).
Under fat LTO all Rust code is one object, so a Rust function is attributed to the first
component of its demangled path (binutils' c++filt; for `<T as Trait>::f`, the crate of T; methods
of primitive types count as "core", `drop_in_place<T>` for the crate of T): generic code instantiated by another crate counts for the
crate that defines it, so the figures are approximate. C code (musl, ring, Lua, libopus) counts
for its archive member's library. Prints the N largest (default 25) and the total.
"""
import re
import subprocess
import sys
from collections import Counter

LINE = re.compile(r"^\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+ (\s*)(\S.*)$")
PRIMITIVE = set("str u8 u16 u32 u64 u128 usize i8 i16 i32 i64 i128 isize bool char f32 f64 T".split())
FIRST = re.compile(r"^(?:<|&|\*const |\*mut |mut |dyn |\[|\()*([A-Za-z_][A-Za-z0-9_]*)")


def demangle(names):
    """Demangled names (legacy and v0 Rust, C++) by binutils' c++filt, in one batch."""
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
    return out.stdout.split("\n")


def crate_of(demangled):
    """The first path component, or for `<T as Trait>::f` the crate of T."""
    if "::" not in demangled:
        return None
    for generic in ("core::ptr::drop_in_place<", "core::ptr::drop_glue<"):
        if demangled.startswith(generic):  # the glue of a type counts for the type's crate
            demangled = demangled[len(generic) :]
    m = FIRST.match(demangled)
    if not m:
        return "?"
    return "core" if m[1] in PRIMITIVE else m[1]


def library_of(path):
    m = re.search(r"lib([A-Za-z0-9_.]+?)(?:-[0-9a-f]+)?\.(?:rlib|a)\(", path)
    if m:
        return m[1] + (" (C)" if ".rcgu.o" not in path else "")
    return path.rsplit("/", 1)[-1]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    items, in_text, current = [], False, None
    with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            size, indent, what = int(m[2], 16), len(m[3]), m[4]
            if indent == 0:
                in_text = what == ".text"
                current = None
            elif not in_text:
                continue
            elif indent < 16:  # an input section: attributed by its first symbol, else its file
                current = [size, "", what.rpartition(":(")[0]]
                items.append(current)
            elif current is not None and not current[1]:
                current[1] = what
    names = demangle([i[1] for i in items])
    sizes = Counter()
    for (size, _, path), name in zip(items, names):
        rust = ".rcgu.o" in path
        sizes[(crate_of(name) if rust else None) or library_of(path)] += size
    total = sum(sizes.values())
    for name, size in sizes.most_common(top):
        print(f"{size:>10,}  {100 * size / total:5.1f} %  {name}")
    print(f"{total:>10,}  100.0 %  .text")


if __name__ == "__main__":
    main()
