# One side of run_python_observer_idle_cost.sh: what gpumem's Python observer, once settled, adds
# to Python code that never appends a CUDA tensor to a list. The observer watches list.append
# through a sys.monitoring tool (CPython 3.12+) whose CALL callback disables every call site that
# is not one (interpose/python/sitecustomize.py); this times two workloads, Python builtins and
# small PyTorch CPU operations, in windows that alternate the tool's events off (A) and on (B),
# and prints each workload's B/A: the median of B over that of A, and the median of the pairs'.
# Usage (under gpumem, with its observer on PYTHONPATH): python_observer_idle_cost.py [WINDOWS]
import math
import statistics
import sys
import time

import torch

windows = int(sys.argv[1]) if len(sys.argv) > 1 else 40
if sys.version_info < (3, 12):
    sys.exit("python_observer_idle_cost: the observer's list.append watch needs CPython 3.12+")
tool = next((i for i in range(6) if sys.monitoring.get_tool(i) == "gpumem"), None)
if tool is None:
    sys.exit("python_observer_idle_cost: gpumem's observer is not running (run under gpumem)")
events = sys.monitoring.get_events(tool)
small = torch.ones(8)


def builtins_work(count):
    total = 0.0
    items = []
    table = {}
    for i in range(count):
        total += math.sqrt(i) + len(items) + abs(-i)
        table.get(i & 7)
        isinstance(total, float)
        if i % 64 == 0:
            items.clear()
        items.append(i)  # list.append in the program's own code, of no tensor
    return total


def torch_work(count):
    y = small
    for _ in range(count):
        y = torch.add(y, small).mul(0.5).relu()
    return y


for name, work, count in (("builtins", builtins_work, 20000), ("torch-cpu", torch_work, 2000)):
    work(count)
    off, on = [], []
    for window in range(windows):
        watching = window % 2 == 1
        sys.monitoring.set_events(tool, events if watching else 0)
        work(200)  # settled: the first call at each site after set_events
        start = time.perf_counter_ns()
        work(count)
        (on if watching else off).append(time.perf_counter_ns() - start)
    pairs = [b / a for a, b in zip(off, on)]
    print(
        "%s: A (watch off) median %.3f ms, B (on) %.3f ms, B/A %.4f, pairs' median %.4f "
        "(min %.4f, max %.4f)"
        % (name, statistics.median(off) / 1e6, statistics.median(on) / 1e6,
           statistics.median(on) / statistics.median(off), statistics.median(pairs), min(pairs),
           max(pairs)))
sys.monitoring.set_events(tool, events)
