"""Times `gpumem report` on traces as recorded before symbolization and as `gpumem record` leaves
them (symbolized at exit), with each run's peak memory: the figures for tests/bench/RESULTS.md.

Usage: report_speed.py GPUMEM RUNS TRACE...
Each TRACE must have been recorded with --no-symbolize; a copy beside it is symbolized (timed),
then every report runs RUNS times on each. Prints one line per trace and kind: size, median and
slowest wall time, the largest peak RSS.
"""

import os
import shutil
import statistics
import subprocess
import sys
import time


def timed(argv):
    """(seconds, peak RSS in MiB) of one run of argv, its output discarded."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    error = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    if child.returncode not in (0, 1):
        sys.exit(f"{' '.join(argv)}: exit {child.returncode}: {error.strip()}")
    return elapsed, usage.ru_maxrss / 1024


def report_line(gpumem, runs, trace, kind):
    times, peaks = zip(*(timed([gpumem, "report", trace]) for _ in range(runs)))
    size = os.path.getsize(trace) / 1e6
    print(f"{os.path.basename(trace):44s} {kind:12s} {size:6.1f} MB  median {statistics.median(times):6.2f} s"
          f"  slowest {max(times):6.2f} s  peak RSS {max(peaks):6.0f} MiB  ({runs} runs)")


def main():
    gpumem, runs, traces = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    for trace in traces:
        symbolized = trace[: -len(".trace")] + "-symbolized.trace"
        shutil.copyfile(trace, symbolized)
        seconds, peak = timed([gpumem, "symbolize", symbolized])
        print(f"{os.path.basename(trace):44s} symbolize    {os.path.getsize(trace) / 1e6:6.1f} MB"
              f" -> {os.path.getsize(symbolized) / 1e6:.1f} MB in {seconds:.2f} s, peak RSS {peak:.0f} MiB")
        report_line(gpumem, runs, trace, "as recorded")
        report_line(gpumem, runs, symbolized, "symbolized")


if __name__ == "__main__":
    main()
