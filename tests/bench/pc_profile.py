#!/usr/bin/env python3
"""Summarises pc_sampler's files: each library's share of the samples, the top functions, and
for one library (libgpumem.so by default) the top source lines, resolved with addr2line against a
copy of that library with debug info (the build's).

Usage: pc_profile.py [--lib build/lib/libgpumem.so] [--top N] SAMPLES_FILE...
"""
import argparse
import collections
import os
import re
import subprocess
import sys


def read_samples(paths):
    rows = []  # (count, library, offset, symbol)
    total = 0
    for path in paths:
        with open(path) as f:
            for line in f:
                if line.startswith("# samples"):
                    total += int(line.split()[2])
                    continue
                count, library, offset, symbol = line.rstrip("\n").split(" ", 3)
                rows.append((int(count), library, int(offset, 16), symbol))
    return total, rows


def demangle(names):
    if not names:
        return {}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    return dict(zip(names, out.stdout.splitlines())) if out.returncode == 0 else {}


def source_lines(lib, offsets):
    """offset -> (file:line, function), of the innermost (possibly inlined) function."""
    if not offsets or not os.path.exists(lib):
        return {}
    out = subprocess.run(["addr2line", "-e", lib, "-f", "-C"] + [hex(o) for o in offsets],
                         capture_output=True, text=True)
    lines = out.stdout.splitlines()
    if out.returncode != 0 or len(lines) != 2 * len(offsets):
        return {}
    result = {}
    for i, offset in enumerate(offsets):
        function, where = lines[2 * i], lines[2 * i + 1].split(" ")[0]
        result[offset] = (re.sub(r"^.*?/(core|interpose|cupti)/", r"\1/", where),
                          re.sub(r"\(.*", "", function)[:70])
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib", default="build/lib/libgpumem.so")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    total, rows = read_samples(args.files)
    if total == 0:
        sys.exit("pc_profile: no samples in %s" % " ".join(args.files))
    print("samples: %d" % total)
    per_library = collections.Counter()
    per_symbol = collections.Counter()
    for count, library, _, symbol in rows:
        per_library[os.path.basename(library)] += count
        per_symbol[(os.path.basename(library), symbol)] += count
    print("\nby library:")
    for library, count in per_library.most_common(12):
        print("  %6.2f%%  %s" % (100.0 * count / total, library))
    names = demangle([s for (_, s) in per_symbol if s != "?"])
    print("\nby function (top %d):" % args.top)
    for (library, symbol), count in per_symbol.most_common(args.top):
        print("  %6.2f%%  %-20s %s" % (100.0 * count / total, library[:20],
                                        names.get(symbol, symbol)[:100]))
    wanted = os.path.basename(args.lib)
    per_offset = collections.Counter()
    for count, library, offset, _ in rows:
        if os.path.basename(library) == wanted:
            per_offset[offset] += count
    lib_total = sum(per_offset.values())
    if lib_total == 0:
        return
    where = source_lines(args.lib, sorted(per_offset))
    per_line = collections.Counter()
    per_function = collections.Counter()
    for offset, count in per_offset.items():
        line, function = where.get(offset, ("?", "?"))
        per_line["%s  %s" % (line, function)] += count
        per_function[function] += count
    print("\n%s (%.2f%% of all samples) by function, inlined ones apart:" %
          (wanted, 100.0 * lib_total / total))
    for function, count in per_function.most_common(args.top):
        print("  %6.2f%%  %s" % (100.0 * count / total, function))
    print("\n%s by source line:" % wanted)
    for line, count in per_line.most_common(args.top * 2):
        print("  %6.2f%%  %s" % (100.0 * count / total, line))


if __name__ == "__main__":
    main()
