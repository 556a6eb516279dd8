#!/usr/bin/env python3
"""Summarises run_step_time_toggle.sh's runs: OUT_DIR/toggle.txt (and toggle_aa.txt, the A/A
control), one JSON line per process as train_mlp.py prints it under GPUMEM_BENCH_TOGGLE=1.

For each: the median over all pairs of (window recording / window paused), wall and CPU time,
each process's own median, and a 95 % interval for the wall median from a bootstrap over
processes (processes resampled with replacement, their pairs pooled): processes differ more from
one another than pairs within one do, so the process is the unit that is resampled. "Reliably
under a target" means the interval's upper end is under it.

Usage: toggle_summary.py OUT_DIR [HEADER]
"""
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


def summarise(path, label):
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return None
    runs = [json.loads(line) for line in open(path) if line.strip()]
    if not runs or any("toggle_pairs" not in run for run in runs):
        return f"  {label}: no toggle figures (is GPUMEM_BENCH_TOGGLE honoured?)"
    wall_runs = [run["toggle_wall_ratios"] for run in runs if run["toggle_wall_ratios"]]
    wall = [r for run in wall_runs for r in run]
    cpu = [r for run in runs for r in run["toggle_cpu_ratios"]]
    if not wall:
        return f"  {label}: no pairs"
    per_process = " ".join(f"{statistics.median(run):.3f}" for run in wall_runs)
    low, high = bootstrap_interval(wall_runs)
    return (f"  {label}: {len(wall)} pairs; wall ratio {statistics.median(wall):.3f} "
            f"(95 % interval {low:.3f}-{high:.3f}, bootstrap over {len(wall_runs)} processes; "
            f"per process {per_process}); all threads' CPU ratio {statistics.median(cpu):.3f}")


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: toggle_summary.py OUT_DIR [HEADER]")
    out = sys.argv[1]
    if len(sys.argv) > 2:
        print(sys.argv[2])
    lines = [summarise(os.path.join(out, "toggle.txt"),
                       "recording (stacks on every allocation and launch)"),
             summarise(os.path.join(out, "toggle_aa.txt"), "A/A control (both windows paused)")]
    lines = [line for line in lines if line is not None]
    if not lines:
        sys.exit(f"toggle_summary: no runs in {out}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
