#!/usr/bin/env python3
"""Turn a trace of the code `chela run` executes into a symbol ordering file for the linker.

    python3 scripts/startup-order.py MAP BIN OUT TRACE...
    python3 scripts/startup-order.py --check MAP ORDER [MIN_PERCENT]

MAP is lld's link map of BIN (`-Wl,-Map=MAP,--no-demangle`; crates/chela/build.rs writes it
when CHELA_LINK_MAP is set). Each TRACE is the log of one run of BIN under
`valgrind --tool=lackey --trace-superblocks=yes`: one `SB <address>` line per block of code
executed, in the order executed. The first block is the ELF entry point, which gives the
address the program was loaded at.

OUT lists, for every input section of `.text` that any trace entered, one symbol defined in it,
in the order the sections were first entered (first trace first). lld then places those
sections together at the start of `.text` (`--symbol-ordering-file`), so the code that runs from
exec until the daemon idles fills a few contiguous 64 KiB blocks instead of touching most of
them. A symbol that no longer exists is skipped by the linker: a stale list costs resident
memory, never correctness.

`--check` says how many of ORDER's symbols the binary of MAP still defines, and fails below
MIN_PERCENT (default 90): CI's release-build step uses it to say when to regenerate the list.
"""
import bisect
import re
import struct
import sys

SECTION = re.compile(r"^\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+ (\s*)(\S.*)$")


def text_sections(map_path):
    """Input sections of the `.text` output section: (start, end, first symbol or None)."""
    out, current, in_text = [], None, False
    with open(map_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = SECTION.match(line)
            if not m:
                continue
            addr, size, indent, what = int(m[1], 16), int(m[2], 16), len(m[3]), m[4]
            if indent == 0:  # an output section
                in_text = what == ".text"
                current = None
            elif not in_text:
                continue
            elif indent < 16:  # an input section: `file:(name)`
                current = [addr, addr + size, None]
                out.append(current)
            elif current is not None and current[2] is None:  # its first symbol
                current[2] = what
    out.sort()
    return out


def entry_point(bin_path):
    with open(bin_path, "rb") as f:
        head = f.read(64)
    if head[:4] != b"\x7fELF" or head[4] != 2:
        sys.exit(f"{bin_path}: not a 64-bit ELF file")
    return struct.unpack_from("<Q", head, 24)[0]


def blocks(trace_path):
    with open(trace_path, encoding="ascii", errors="replace") as f:
        for line in f:
            if line.startswith("SB "):
                yield int(line[3:], 16)


def check(map_path, order_path, min_percent):
    with open(order_path, encoding="utf-8") as f:
        wanted = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    defined = set()
    with open(map_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = SECTION.match(line)
            if m and len(m[3]) >= 16:
                defined.add(m[4])
    found = sum(1 for name in wanted if name in defined)
    percent = 100 * found / max(len(wanted), 1)
    print(f"{order_path}: {found} of {len(wanted)} symbols found in the binary ({percent:.1f} %)")
    if percent < min_percent:
        sys.exit(
            f"the start-up ordering is stale (under {min_percent} %): run scripts/startup-order.sh "
            "and commit crates/chela/startup-order.txt (a stale list costs idle RSS, not correctness)"
        )


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "--check":
        check(sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) > 4 else 90.0)
        return
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    map_path, bin_path, out_path, traces = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    sections = text_sections(map_path)
    if not sections:
        sys.exit(f"{map_path}: no input sections in .text (is it lld's map of {bin_path}?)")
    starts = [s[0] for s in sections]
    entry = entry_point(bin_path)
    order, seen, executed = [], set(), 0
    for trace in traces:
        base = None
        for addr in blocks(trace):
            if base is None:
                base = addr - entry
            executed += 1
            i = bisect.bisect_right(starts, addr - base) - 1
            if i < 0 or i in seen or addr - base >= sections[i][1]:
                continue
            seen.add(i)
            if sections[i][2] is not None:
                order.append(sections[i][2])
        if base is None:
            sys.exit(f"{trace}: no `SB` lines (was it run with --trace-superblocks=yes?)")
    if not order:
        sys.exit("no executed address fell in .text: the map and the traced binary differ")
    touched = sum(sections[i][1] - sections[i][0] for i in seen)
    total = sections[-1][1] - sections[0][0]
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("# Start-up code of `chela run` (gateway + Telegram), in the order first executed.\n")
        f.write("# Generated by scripts/startup-order.sh; do not edit. See crates/chela/build.rs.\n")
        for name in order:
            f.write(name + "\n")
    print(
        f"{len(order)} symbols; {len(seen)} of {len(sections)} input sections entered, "
        f"{touched} of {total} bytes of .text; {executed} blocks traced",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
