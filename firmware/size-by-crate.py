#!/usr/bin/env python3
"""Where an ESP32 firmware image's flash goes, by crate (docs/BENCHMARKS.md, "where the C3
image goes").

    firmware/size-by-crate.py ELF            # the largest groups
    firmware/size-by-crate.py BEFORE AFTER   # the groups that changed most, the symbols that
                                             # grew and shrank most

Reads `riscv64-unknown-elf-nm -S -C` and `objdump -h`; counts the symbols in .text, .rodata and
.rodata.wifi, grouped by the first path segment of the demangled name (generic code counts for
the crate defining the function; C symbols, mostly the WiFi blobs, are one group).
"""
import collections
import signal
import re
import subprocess
import sys

FLASH = (".text", ".rodata", ".rodata.wifi")


def symbols(elf):
    sections = []
    for line in subprocess.run(["riscv64-unknown-elf-objdump", "-h", elf], capture_output=True, text=True, check=True).stdout.splitlines():
        p = line.split()
        if len(p) >= 7 and p[0].isdigit() and p[1] in FLASH:
            sections.append((int(p[3], 16), int(p[2], 16)))
    nm = subprocess.run(["riscv64-unknown-elf-nm", "-S", "-C", "--size-sort", elf], capture_output=True, text=True, check=True).stdout
    out = collections.Counter()
    for line in nm.splitlines():
        m = re.match(r"([0-9a-f]+) ([0-9a-f]+) \w (.*)", line)
        if m and any(a <= int(m[1], 16) < a + n for a, n in sections):
            out[m[3]] += int(m[2], 16)
    return out


def crate(name):
    n = name.lstrip("<")
    n = re.sub(r"^(impl |dyn |&mut |&|\*const |\*mut )", "", n)
    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)::", n)
    if m:
        return m[1]
    # opt-level z lets LLVM's machine outliner factor repeated instruction runs out of every
    # crate into these; they are not the C blobs'.
    return "(outlined by LLVM, any crate)" if n.startswith("OUTLINED_FUNCTION_") else "(C: WiFi blobs, ROM glue)"


def by_crate(syms):
    out = collections.Counter()
    for name, size in syms.items():
        out[crate(name)] += size
    return out


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`
    if len(sys.argv) == 2:
        syms = symbols(sys.argv[1])
        print(f"flash symbols: {sum(syms.values())} B")
        for c, size in by_crate(syms).most_common(30):
            print(f"{size:9d} {c}")
    elif len(sys.argv) == 3:
        a, b = symbols(sys.argv[1]), symbols(sys.argv[2])
        ca, cb = by_crate(a), by_crate(b)
        print(f"flash symbols: {sum(a.values())} -> {sum(b.values())} B ({sum(b.values()) - sum(a.values()):+d})")
        print("by crate (after - before), the largest changes:")
        for c in sorted(set(ca) | set(cb), key=lambda c: (-abs(cb[c] - ca[c]), c))[:25]:
            print(f"{cb[c] - ca[c]:+9d} {ca[c]:9d} -> {cb[c]:9d} {c}")
        print("symbols that grew most:")
        for n in sorted(set(b), key=lambda n: a[n] - b[n])[:30]:
            if b[n] > a[n]:
                print(f"{b[n] - a[n]:+8d} {n[:160]}")
        print("symbols that shrank most:")
        for n in sorted(set(a), key=lambda n: b[n] - a[n])[:30]:
            if b[n] < a[n]:
                print(f"{b[n] - a[n]:+8d} {n[:160]}")
    else:
        sys.exit(__doc__)


main()
