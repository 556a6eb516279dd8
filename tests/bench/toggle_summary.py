#!/usr/bin/env python3
"""Summarises run_step_time_toggle.sh's runs: OUT_DIR/toggle.txt (and toggle_aa.txt, the A/A
control), one JSON line per process as train_mlp_timed.py prints it under libgpumem_bench.so. Several
OUT_DIRs (runs of one build, on other machines or at other times) are pooled: more processes make
the interval narrower.

For each: the median over all pairs of (window recording / window paused), wall and CPU time,
each process's own median, and a 95 % interval for the wall median from a bootstrap over
processes (processes resampled with replacement, their pairs pooled): processes differ more from
one another than pairs within one do, so the process is the unit that is resampled. "Reliably
under a target" means the interval's upper end is under it: the last line says whether the
recording's interval is under --target (default 1.05, the project's target).

Usage: toggle_summary.py [--header TEXT] [--target RATIO] OUT_DIR...
"""
import argparse
import json
import os
import random
import statistics
import sys


def bootstrap_interval(runs, rounds=2000, seed=1):
    rng = random.Random(seed)
    medians = []
    for _ in range(rounds):
        sample = [rng.choice(runs) for _ in runs]
        medians.append(statistics.median(r for run in sample for r in run))
    medians.sort()
    return medians[int(0.025 * rounds)], medians[int(0.975 * rounds) - 1]


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


def main():
    parser = argparse.ArgumentParser(description="run_step_time_toggle.sh's summary")
    parser.add_argument("--header", help="a first line to print")
    parser.add_argument("--target", type=float, default=1.05,
                        help="the ratio the recording's interval must stay under")
    parser.add_argument("out_dirs", nargs="+", metavar="OUT_DIR")
    args = parser.parse_args()
    recording, high = summarise(read_runs(os.path.join(d, "toggle.txt") for d in args.out_dirs),
                                "recording (stacks on every allocation and launch)")
    control, _ = summarise(read_runs(os.path.join(d, "toggle_aa.txt") for d in args.out_dirs),
                           "A/A control (both windows paused)")
    if recording is None and control is None:
        sys.exit(f"toggle_summary: no runs in {' '.join(args.out_dirs)}")
    if args.header:
        print(args.header)
    for line in (recording, control):
        if line is not None:
            print(line)
    if high is not None:
        verdict = "met" if high < args.target else "not met"
        print(f"  target {args.target:.2f}x: {verdict} (the interval's upper end is {high:.3f})")


if __name__ == "__main__":
    main()
