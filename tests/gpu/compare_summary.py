"""Compares `gpumem report --summary` with PyTorch's torch.cuda.memory_summary() of the same run.

Usage: compare_summary.py TORCH_SUMMARY GPUMEM_REPORT

Layout: the same lines in the same order — every border and header line identical, every row
label identical — with the title line (which names the tool) the only exception. Values: the rows
the segment-level recording measures (GPU reserved memory, GPU reserved segments and their
large/small pool rows) must equal PyTorch's cell for cell; the rows it cannot support must say
n/a (never a made-up number). Prints what it compared; exits 1 on any difference.
"""

import sys

MEASURED = ("GPU reserved memory", "GPU reserved segments")


def table(lines):
    """The first box that starts with a |===...| line, as a list of lines."""
    start = next(i for i, line in enumerate(lines) if line.startswith("|====="))
    end = start + 1
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return lines[start:end]


def cells(line):
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def main():
    torch_lines = table(open(sys.argv[1]).read().splitlines())
    ours = table(open(sys.argv[2]).read().splitlines())
    problems = []
    if len(torch_lines) != len(ours):
        problems.append(f"{len(ours)} lines, PyTorch's table has {len(torch_lines)}")
    row = None
    compared = 0
    for index, (theirs, mine) in enumerate(zip(torch_lines, ours)):
        if len(theirs) != len(mine):
            problems.append(f"line {index + 1}: width {len(mine)}, PyTorch {len(theirs)}")
        if index == 1:  # the title: "PyTorch CUDA memory summary" / "gpumem memory summary"
            continue
        their_cells, my_cells = cells(theirs), cells(mine)
        is_row = len(their_cells) == 5 and not theirs.startswith("|-") and "Metric" not in theirs
        if not is_row:
            if theirs != mine:
                problems.append(f"line {index + 1}: {mine!r}, PyTorch {theirs!r}")
            continue
        label = their_cells[0]
        if not label.startswith("from "):
            row = label
        if my_cells[0] != label:
            problems.append(f"line {index + 1}: row {my_cells[0]!r}, PyTorch {label!r}")
            continue
        if row in MEASURED:
            compared += 1
            if my_cells[1:] != their_cells[1:]:
                problems.append(f"{row} / {label}: {my_cells[1:]}, PyTorch {their_cells[1:]}")
        elif any(cell != "n/a" for cell in my_cells[1:]):
            problems.append(f"{row} / {label}: {my_cells[1:]} where the recording cannot know")
    print(f"compared {len(ours)} lines with PyTorch's; {compared} measured rows cell for cell")
    for line in ours:
        if any(line.startswith(f"| {name}") for name in MEASURED):
            print("  gpumem  " + line)
    for line in torch_lines:
        if any(line.startswith(f"| {name}") for name in MEASURED):
            print("  PyTorch " + line)
    for problem in problems:
        print("  DIFFERS: " + problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
