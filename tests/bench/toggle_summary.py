#!/usr/bin/env python3
"""Summarises the step-time benchmarks that measure inside one process, from their OUT_DIRs. Several
OUT_DIRs (runs of one build, on other machines or at other times) are pooled: more processes make
the intervals narrower.

run_step_time_toggle.sh: OUT_DIR/toggle.txt (and toggle_aa.txt, the A/A control), one JSON line per
process as step_time_timed.py prints it under libgpumem_bench.so. For each: the median over all
pairs of (window recording / window paused), wall and CPU time, each process's own median, and a
95 % interval for the wall median from a bootstrap over processes (processes resampled with
replacement, their pairs pooled): processes differ more from one another than pairs within one do,
so the process is the unit that is resampled. "Reliably under a target" means the interval's upper
end is under it: the last line says whether the recording's interval is under --target (default
1.05, the project's target).

run_recorders_side_by_side.sh: OUT_DIR/MODEL.MODE.recorders.txt (and .recorders_aa.txt, the A/A
control), one JSON line per process of step_time_timed.py --recorders. One Markdown row per model
and allocator mode: the step time in A (the median over processes of each one's median window),
the median over all blocks of B/A (gpumem recording), C/A (PyTorch's _record_memory_history,
stacks="all") and D/A (stacks="python"), and gpumem's added cost as a fraction of what
stacks="all" adds, (B-1)/(C-1), each with its 95 % interval from the same bootstrap
resamples of the processes; where C was not available (PyTorch's recorder raises under
backend:cudaMallocAsync), C comes from the same model's default-allocator processes, resampled on
their own. Then the targets, met when the interval's upper end is at most: B/A 1.03 under the
default allocator and expandable segments, 1.05 in the tensors mode, where (B-1)/(C-1) must also be
at most 0.25. With one process a figure has no interval and its target is "not measured".

Usage: toggle_summary.py [--header TEXT] [--target RATIO] OUT_DIR...
"""
import argparse
import json
import math
import os
import random
import statistics
import sys
import zlib

ROUNDS = 2000  # bootstrap resamples


def resamples(processes, rounds=ROUNDS, seed=1):
    """`rounds` bootstrap samples of `processes`: as many drawn with replacement."""
    rng = random.Random(seed)
    for _ in range(rounds):
        yield [rng.choice(processes) for _ in processes]


def central_interval(values):
    """The central 95 % of bootstrap values."""
    values = sorted(values)
    return values[int(0.025 * len(values))], values[int(0.975 * len(values)) - 1]


def bootstrap_interval(runs, rounds=ROUNDS, seed=1):
    return central_interval(statistics.median(r for run in sample for r in run)
                            for sample in resamples(runs, rounds, seed))


def read_runs(paths):
    """The JSON lines of every existing, non-empty file in `paths`, pooled."""
    runs = []
    for path in paths:
        if os.path.exists(path):
            runs += [json.loads(line) for line in open(path) if line.strip()]
    return runs


def summarise(runs, label):
    """(line, upper end of the wall ratio's interval or None)."""
    if not runs:
        return None, None
    if any("toggle_pairs" not in run for run in runs):
        return f"  {label}: no toggle figures (was libgpumem_bench.so preloaded?)", None
    wall_runs = [run["toggle_wall_ratios"] for run in runs if run["toggle_wall_ratios"]]
    wall = [r for run in wall_runs for r in run]
    cpu = [r for run in runs for r in run["toggle_cpu_ratios"]]
    if not wall:
        return f"  {label}: no pairs", None
    per_process = " ".join(f"{statistics.median(run):.3f}" for run in wall_runs)
    low, high = bootstrap_interval(wall_runs)
    return (f"  {label}: {len(wall)} pairs; wall ratio {statistics.median(wall):.3f} "
            f"(95 % interval {low:.3f}-{high:.3f}, bootstrap over {len(wall_runs)} processes; "
            f"per process {per_process}); all threads' CPU ratio {statistics.median(cpu):.3f}",
            high)


# ----- run_recorders_side_by_side.sh: gpumem against PyTorch's own recorder, in one process -----

RUNS_SUFFIX = ".recorders.txt"  # OUT_DIR/MODEL.MODE.recorders.txt: one JSON line per process
CONTROL_SUFFIX = ".recorders_aa.txt"  # the same with gpumem paused in B too (A/A control)
CONDITIONS = "BCD"
# The upper ends of the 95 % intervals that count as met: B/A, and (B-1)/(C-1) where named.
TARGETS = {"default": {"B/A": 1.03}, "expandable": {"B/A": 1.03},
           "tensors": {"B/A": 1.05, "(B-1)/(C-1)": 0.25}}


def recorder_files(out_dirs):
    """{(model, mode): {"runs": [...], "control": [...]}} from every OUT_DIR."""
    rows = {}
    for out_dir in out_dirs:
        names = sorted(os.listdir(out_dir)) if os.path.isdir(out_dir) else []
        for name in names:
            for suffix, kind in ((RUNS_SUFFIX, "runs"), (CONTROL_SUFFIX, "control")):
                if name.endswith(suffix):
                    model, _, mode = name[:-len(suffix)].partition(".")
                    row = rows.setdefault((model, mode), {"runs": [], "control": []})
                    row[kind] += read_runs([os.path.join(out_dir, name)])
    return rows


def condition_medians(processes):
    """Each condition's median ratio to A over all blocks of `processes` (None: no blocks)."""
    medians = {}
    for condition in CONDITIONS:
        pooled = [r for run in processes for r in run["recorder_wall_ratios"].get(condition, [])]
        medians[condition] = statistics.median(pooled) if pooled else None
    return medians


def row_statistics(runs, seed):
    """The medians over all processes, the same for every bootstrap resample of the processes,
    why a condition was not available (as the processes said), and the median process's step
    in A."""
    runs = [run for run in runs if "recorder_wall_ratios" in run]
    unavailable = {}
    for run in runs:
        for condition, why in run.get("recorder_unavailable", {}).items():
            unavailable.setdefault(condition, why)
    a_ms = [run.get("recorder_window_ms", {}).get("A") for run in runs]
    a_ms = [ms for ms in a_ms if ms is not None]
    return {"processes": len(runs), "blocks": sum(run["recorder_blocks"] for run in runs),
            "step_ms": f"{statistics.median(a_ms):.3f}" if a_ms else "–",
            "point": condition_medians(runs),
            "rounds": [condition_medians(sample) for sample in resamples(runs, seed=seed)]
            if runs else [], "unavailable": unavailable}


def added_cost_fraction(b, c):
    """gpumem's added cost as a fraction of what PyTorch's recorder adds: (B-1)/(C-1); infinite
    where the recorder added nothing."""
    if b is None or c is None:
        return None
    return (b - 1) / (c - 1) if c > 1 else math.inf


def estimate(point, values, processes):
    """(text, upper end of the 95 % interval or None) of a statistic and its bootstrap values."""
    if point is None:
        return "n/a", None
    values = [v for v in values if v is not None]
    if processes < 2 or not values:
        return f"{point:.3f} (1 process)", None
    low, high = central_interval(values)
    return f"{point:.3f} ({low:.3f}–{high:.3f})", high


def recorder_row(model, mode, files, default_row):
    """The table's cells of one (model, mode) and the interval's upper end of each targeted
    figure. Where C was not available, (B-1)/(C-1) takes C from the default mode's row."""
    seed = zlib.crc32(f"{model}.{mode}".encode())
    row = row_statistics(files["runs"], seed)
    control = row_statistics(files["control"], seed + 1)
    cells, uppers, reasons = [], {}, {}
    for condition in CONDITIONS:
        text, uppers[f"{condition}/A"] = estimate(
            row["point"][condition], (r[condition] for r in row["rounds"]), row["processes"])
        if condition in row["unavailable"]:
            text = "n/a (not available)"
            reasons.setdefault(row["unavailable"][condition], []).append(condition)
        cells.append(text)
    notes = [f"{', '.join(conditions)} not available: {why}" for why, conditions in reasons.items()]
    c_row = row
    if row["point"]["C"] is None and default_row is not None and default_row["point"]["C"]:
        c_row = default_row
        notes.append("(B-1)/(C-1) takes C from the default allocator's processes")
    fractions = [added_cost_fraction(r["B"], c["C"])
                 for r, c in zip(row["rounds"], c_row["rounds"])]
    text, uppers["(B-1)/(C-1)"] = estimate(
        added_cost_fraction(row["point"]["B"], c_row["point"]["C"]), fractions,
        min(row["processes"], c_row["processes"]))
    cells.append(text if c_row is row else f"{text}, C of default")
    cells.append(estimate(control["point"]["B"], (r["B"] for r in control["rounds"]),
                          control["processes"])[0] if control["processes"] else "–")
    label = f"{row['processes']} ({row['blocks']} blocks)"
    return [model, mode, label, row["step_ms"]] + cells, uppers, notes


def recorder_table(rows):
    """The Markdown table (one row per model and allocator mode), its notes and the targets'
    verdicts, as lines."""
    lines = ["| model | allocator | processes | step, A (ms) | B/A gpumem | C/A stacks=all "
             "| D/A stacks=python | (B-1)/(C-1) | A/A control |",
             "|---|---|---|---|---|---|---|---|---|"]
    notes, verdicts = [], []
    defaults = {model: row_statistics(files["runs"], zlib.crc32(f"{model}.default".encode()))
                for (model, mode), files in rows.items() if mode == "default"}
    for (model, mode), files in sorted(rows.items()):
        cells, uppers, row_notes = recorder_row(model, mode, files, defaults.get(model))
        lines.append("| " + " | ".join(cells) + " |")
        notes += [f"- {model}, {mode}: {note}" for note in row_notes]
        for figure, target in TARGETS.get(mode, {}).items():
            upper = uppers[figure]
            verdict = ("not measured" if upper is None else
                       f"{'met' if upper <= target else 'not met'} (upper end {upper:.3f})")
            verdicts.append(f"  {model}, {mode}: {figure} upper end <= {target:.2f}: {verdict}")
    return lines + [""] + notes + ["targets (the 95 % interval's upper end):"] + verdicts


def toggle_lines(out_dirs, target):
    """run_step_time_toggle.sh's lines, or [] without its files."""
    recording, high = summarise(read_runs(os.path.join(d, "toggle.txt") for d in out_dirs),
                                "recording (stacks on every allocation and launch)")
    control, _ = summarise(read_runs(os.path.join(d, "toggle_aa.txt") for d in out_dirs),
                           "A/A control (both windows paused)")
    lines = [line for line in (recording, control) if line is not None]
    if high is not None:
        verdict = "met" if high < target else "not met"
        lines.append(f"  target {target:.2f}x: {verdict} (the interval's upper end is {high:.3f})")
    return lines


def main():
    parser = argparse.ArgumentParser(description="the step-time benchmarks' summary")
    parser.add_argument("--header", help="a first line to print")
    parser.add_argument("--target", type=float, default=1.05,
                        help="the ratio the toggle's recording interval must stay under")
    parser.add_argument("out_dirs", nargs="+", metavar="OUT_DIR")
    args = parser.parse_args()
    lines = toggle_lines(args.out_dirs, args.target)
    rows = recorder_files(args.out_dirs)
    if rows:
        lines += recorder_table(rows)
    if not lines:
        sys.exit(f"toggle_summary: no runs in {' '.join(args.out_dirs)}")
    if args.header:
        print(args.header)
    print("\n".join(lines))

if __name__ == "__main__":
    main()
