#!/usr/bin/env python3
"""Turn a trace of the code `chela run` executes into the start-up ordering list for the linker.

    python3 scripts/startup-order.py MAP BIN OUT TRACE...
    python3 scripts/startup-order.py --check MAP ORDER [MIN_PERCENT]
    python3 scripts/startup-order.py --check-bin BIN ORDER [MIN_PERCENT]

MAP is lld's link map of BIN (`-Wl,-Map=MAP,--no-demangle`; crates/chela/build.rs writes it
when CHELA_LINK_MAP is set). Each TRACE is the log of one run of BIN under
`valgrind --tool=lackey --trace-superblocks=yes --vex-guest-chase=no`: one `SB <address>` line
per block of code executed, in the order executed (without `--vex-guest-chase=no` a small callee
is folded into its caller's block and never listed). The first block is the ELF entry point,
which gives the address the program was loaded at.

OUT has one section per C library (`# Traced with glibc:`, `# Traced with musl:`): the trace
replaces the section of the libc BIN links (a static musl binary defines `__libc_start_main`)
and keeps the other whole. Each lists, for every input section of `.text` that any trace entered, the function it holds:
first those entered after the daemon's start-up trim (`chela_daemon::trim::trim`; after it
dropped its file pages only these come back), then the others, each group in the order the
sections were first entered (first trace first), with rustc's hash left out
(`_ZN5chela4main17h*`: the hashes differ per target, profile, compiler and dependency versions,
the paths do not). crates/chela/build.rs turns the list into a linker script that places those
sections together at the start of `.text`, so the code that runs from exec until the daemon
idles fills a few contiguous 64 KiB blocks instead of touching most of them. A name that no
longer matches is skipped by the linker: a stale list costs resident memory, never correctness.

`--check` says how many of the names in ORDER's section for MAP's libc the binary of MAP still
defines; `--check-bin` says the
same of any build's binary with its symbols (a debug build will do: CI checks its own), and
lists the missing names. Both fail below MIN_PERCENT (default 98).
"""
import bisect
import collections
import os
import re
import struct
import subprocess
import sys

# rustc's legacy mangling (our crates) ends a name with `17h` and 16 hex digits of hash; the v0
# mangling (the standard library's) has a hash per crate (`Cs<base62>_`) and back-references by
# offset (`B<base62>_`), which move when a hash's length does. LTO may add `.llvm.N`.
LEGACY = re.compile(r"^(_ZN.*17h)[0-9a-f]{16}E$")
V0_CRATE = re.compile(r"Cs[0-9A-Za-z]+_")
V0_BACKREF = re.compile(r"B[0-9A-Za-z]*_")
# What LLVM puts before a function's name in its section's (`.text.unlikely.NAME`).
PREFIXES = ("unlikely.", "hot.", "startup.", "exit.", "split.")
SECTION = re.compile(r"^\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+ (\s*)(\S.*)$")


# The trim's section (`chela_daemon::trim::trim` without its hash): the legacy mangling
# (`_ZN12chela_daemon4trim4trim17h*`) or the v0 one (`_RNvNtCs*_12chela_daemon4trim4trim`, what
# Debian's rustc of scripts/build-static.sh uses).
TRIM = re.compile(r"^(_ZN12chela_daemon4trim4trim17h\*|_RNvNtCs\*_12chela_daemon4trim4trim)$")


def key(name):
    """The name without its hashes: what the list holds and the linker script matches (a glob)."""
    name = re.sub(r"\.llvm\.\d+$", "", name)
    prefix, dot, rest = name.rpartition(".") if name.startswith(PREFIXES) else ("", "", name)
    m = LEGACY.match(rest)
    if m:
        return prefix + dot + m[1] + "*"
    if rest.startswith("_R"):
        return prefix + dot + V0_BACKREF.sub("B*_", V0_CRATE.sub("Cs*_", rest))
    return name


def symbol(name):
    """The function a list name or section names: without `unlikely.` and the like, or the
    `.N` that LLVM adds to a local symbol's name to keep it unique."""
    if name.startswith(PREFIXES):
        name = name.split(".", 1)[1]
    return re.sub(r"\.\d+$", "", name)


def text_sections(map_path):
    """Input sections of `.text`: (start, end, name without hash or None, full name or None)."""
    out, in_text = [], False
    with open(map_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = SECTION.match(line)
            if not m:
                continue
            addr, size, indent, what = int(m[1], 16), int(m[2], 16), len(m[3]), m[4]
            if indent == 0:  # an output section
                in_text = what == ".text"
            elif not in_text:
                continue
            elif indent < 16:  # an input section: `file:(name)`; only `.text.NAME` can be named
                section = what[what.rfind(":(") + 2 : -1] if what.endswith(")") else ""
                name = section[len(".text.") :] if section.startswith(".text.") else None
                out.append([addr, addr + size, name and key(name), name])
    out.sort()
    return out


def entry_point(bin_path):
    with open(bin_path, "rb") as f:
        head = f.read(64)
    if head[:4] != b"\x7fELF" or head[4] != 2:
        sys.exit(f"{bin_path}: not a 64-bit ELF file")
    return struct.unpack_from("<Q", head, 24)[0]


MAPPED = re.compile(r"svma 0x([0-9a-f]+), avma 0x([0-9a-f]+)")


def blocks(trace_path, bin_path, entry):
    """The executed addresses of BIN's code, as link-time addresses.

    A static binary starts at its own entry point, so the first block gives the load address. A
    dynamic one starts in the loader, and valgrind says where it put BIN (`-v -v`: `Reading syms
    from BIN` and then `svma .., avma ..`); the addresses of other objects fall outside `.text`.
    """
    base, reading = None, False
    name = os.path.realpath(bin_path)
    with open(trace_path, encoding="ascii", errors="replace") as f:
        for line in f:
            if line.startswith("SB "):
                addr = int(line[3:], 16)
                if base is None:
                    base = addr - entry
                yield addr - base
            elif base is None and "Reading syms from " in line:
                reading = os.path.realpath(line.split("Reading syms from ", 1)[1].strip()) == name
            elif reading and (m := MAPPED.search(line)):
                base, reading = int(m[2], 16) - int(m[1], 16), False


# The list has one section per C library, each traced with a build for it: the names of generic
# instances (with their hash) and of the C library's own functions differ between the two. A
# build places its own libc's section first (crates/chela/build/startup_order.rs).
SECTION_HEAD = "# Traced with "
LIBCS = ("glibc", "musl")


def libc_of(defined):
    """Which C library a build links: a static musl binary defines musl's start-up function."""
    return "musl" if {"__libc_start_main", "_start_c"} <= set(defined) else "glibc"


def sections_of(order_path):
    """The list's sections: {libc: [names]}, in file order."""
    out, current = {}, None
    with open(order_path, encoding="utf-8") as f:
        for line in f:
            if line.startswith(SECTION_HEAD):
                current = line[len(SECTION_HEAD) :].split()[0].rstrip(":,")
                if current not in LIBCS:
                    sys.exit(f"{order_path}: unknown section {line.strip()!r} (expected one of {LIBCS})")
                out.setdefault(current, [])
            elif line.strip() and not line.startswith("#"):
                if current is None:
                    sys.exit(f"{order_path}: a name before the first `{SECTION_HEAD}LIBC` line")
                out[current].append(line.strip())
    return out


def read_order(order_path, libc):
    """The names of the list's section for libc (empty when it has none)."""
    return sections_of(order_path).get(libc, [])


def report(order_path, wanted, defined, min_percent):
    defined = {symbol(name) for name in defined}
    missing = [name for name in wanted if symbol(name) not in defined]
    found = len(wanted) - len(missing)
    percent = 100 * found / max(len(wanted), 1)
    print(f"{order_path}: {found} of {len(wanted)} names found in the binary ({percent:.1f} %)")
    for name in missing:
        print(f"  missing: {name}")
    if percent < min_percent:
        sys.exit(
            f"the start-up ordering is stale (under {min_percent} %): run scripts/startup-order.sh "
            "and commit crates/chela/startup-order.txt (a stale list costs idle RSS, not correctness)"
        )


def map_names(map_path):
    """Every symbol the map's binary defines, as list names."""
    defined = set()
    with open(map_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = SECTION.match(line)
            if m and len(m[3]) >= 16:
                defined.update((m[4], key(m[4])))
    return defined


def check(map_path, order_path, min_percent):
    defined = map_names(map_path)
    libc = libc_of(defined)
    print(f"{map_path}: a {libc} build; checking the list's {libc} section")
    report(order_path, read_order(order_path, libc), defined, min_percent)


def check_bin(bin_path, order_path, min_percent):
    out = subprocess.run(["nm", "--defined-only", bin_path], capture_output=True, text=True, check=True).stdout
    defined = {key(line.split()[-1]) for line in out.splitlines() if len(line.split()) == 3}
    # A name with its hash is one instance of a generic function, exact for the build it was
    # traced from (target, profile, versions): another build has other hashes, so here only its
    # path is checked. `--check` on a release build's map checks the hashes too.
    libc = libc_of(defined)
    print(f"{bin_path}: a {libc} build; checking the list's {libc} section")
    names = read_order(order_path, libc)
    exact = sum(1 for n in names if key(n) != n)
    print(f"{order_path}: {exact} names of single generic instances, checked without their hash")
    report(order_path, [key(n) for n in names], defined, min_percent)


def main():
    if len(sys.argv) >= 4 and sys.argv[1] in ("--check", "--check-bin"):
        run = check if sys.argv[1] == "--check" else check_bin
        run(sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) > 4 else 98.0)
        return
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    map_path, bin_path, out_path, traces = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    sections = text_sections(map_path)
    if not sections:
        sys.exit(f"{map_path}: no input sections in .text (is it lld's map of {bin_path}?)")
    starts = [s[0] for s in sections]
    entry = entry_point(bin_path)
    # A name without hash that several sections share is a generic function with many instances:
    # its glob would pull them all to the front (tokio's task `poll` alone has dozens), so the
    # instances executed are listed with their hash, exact for this build's configuration.
    instances = collections.Counter(s[2] for s in sections)
    # The daemon drops its file pages once started (chela-daemon's `trim`); what runs after that
    # is all that comes back, so it goes first, in the order it ran after the trim.
    trims = {i for i, s in enumerate(sections) if s[2] and TRIM.match(s[2])}
    order, listed, seen, executed = [], set(), set(), 0
    idle, idle_seen = [], set()
    for trace in traces:
        before = executed
        trimmed = False
        for addr in blocks(trace, bin_path, entry):
            executed += 1
            i = bisect.bisect_right(starts, addr) - 1
            if i < 0 or addr >= sections[i][1]:
                continue
            trimmed = trimmed or i in trims
            name = sections[i][2] if instances[sections[i][2]] == 1 else sections[i][3]
            if trimmed and i not in idle_seen:
                idle_seen.add(i)
                if name is not None:
                    idle.append(name)
            if i in seen:
                continue
            seen.add(i)
            if name is not None and name not in listed:
                listed.add(name)
                order.append(name)
        if executed == before:
            sys.exit(f"{trace}: no `SB` lines (was it run with --trace-superblocks=yes?)")
    if not order:
        sys.exit("no executed address fell in .text: the map and the traced binary differ")
    if not idle:
        # Without the idle part the list would not put first what comes back after the trim.
        sys.exit(
            "no trace reached the daemon's start-up trim (chela_daemon::trim::trim): the daemon ran too "
            "slowly under valgrind; run scripts/startup-order.sh again with a larger IDLE (seconds)"
        )
    first = list(dict.fromkeys(idle))
    order = first + [n for n in order if n not in set(first)]
    # This build's libc gets the traced names; the other libc's section stays whole (its exact
    # instances and C library functions are that build's).
    defined = map_names(map_path)
    libc = libc_of(defined)
    try:
        kept = sections_of(out_path)
    except FileNotFoundError:
        kept = {}
    kept[libc] = order
    touched = sum(sections[i][1] - sections[i][0] for i in seen)
    total = sections[-1][1] - sections[0][0]
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("# Start-up code of `chela run` (gateway + Telegram): first what runs after its start-up trim,\n")
        f.write("# then the rest, each in the order first executed,\n")
        f.write("# each function's name without rustc's hashes. Generated by scripts/startup-order.sh;\n")
        f.write("# do not edit. See crates/chela/build.rs.\n")
        f.write("# One section per C library (scripts/startup-order.sh for glibc, --musl for the static build).\n")
        for section in LIBCS:
            if section in kept:
                f.write(f"{SECTION_HEAD}{section}:\n")
                for name in kept[section]:
                    f.write(name + "\n")
    other = sum(len(v) for k, v in kept.items() if k != libc)
    print(
        f"{libc}: {len(order)} names (+{other} of the other libc kept); {len(seen)} of {len(sections)} input sections entered, "
        f"{touched} of {total} bytes of .text; {executed} blocks traced",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
