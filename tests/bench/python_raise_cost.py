# One side of run_python_raise_cost.sh: a ValueError raised DEPTH frames below the `try` that
# catches it, ITERATIONS times, after `import torch`: under gpumem, the Python observer's RAISE
# callback (CPython 3.12+) then runs in each of the DEPTH + 1 frames the exception passes through.
# Prints ns_per_raise=N.
# Usage: python_raise_cost.py [ITERATIONS] [DEPTH]
import sys
import time

import torch  # noqa: F401 (the observer watches exceptions once torch is imported)

iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
depth = int(sys.argv[2]) if len(sys.argv) > 2 else 1


def fail(level):
    if level <= 1:
        raise ValueError(level)
    return fail(level - 1)


def loop(count):
    start = time.perf_counter_ns()
    for _ in range(count):
        try:
            fail(depth)
        except ValueError:
            pass
    return time.perf_counter_ns() - start


loop(1000)  # warm-up
print("ns_per_raise=%d" % (loop(iterations) // iterations))
