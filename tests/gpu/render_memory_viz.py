#!/usr/bin/env python3
"""Renders snapshots written by `gpumem export --format memory-viz` with PyTorch's own viewer code.

    render_memory_viz.py SNAPSHOT.pickle...

For each snapshot, loads it with pickle, then calls torch.cuda._memory_viz's plots (trace_plot,
trace_plot(plot_segments=True), segment_plot: each must return an HTML string) and its textual
reports where this PyTorch has them (segsum, trace, memory and segments with the flame graph step
replaced by the identity, so nothing is downloaded). Prints one line per check:

    leak_loop.pickle trace_plot: ok (12345 chars of HTML)
    leak_loop.pickle segsum: FAIL AssertionError: ...

Exit 0 when every check passed, 1 when one failed. Without an importable torch (this is the GPU
machine's PyTorch 2.11 check; it runs anywhere else too) each snapshot is only loaded, one line
says the plots were skipped and why, and the exit status is 0.
"""
import os
import pickle
import sys


def main(paths):
    try:
        from torch.cuda import _memory_viz as viz
    except Exception as error:  # ImportError, or a torch that cannot load its libraries
        viz = None
        skipped = "%s: %s" % (type(error).__name__, error)
    failures = 0
    for path in paths:
        name = os.path.basename(path)
        try:
            with open(path, "rb") as f:
                snapshot = pickle.load(f)
            events = sum(len(trace) for trace in snapshot["device_traces"])
            print("%s load: ok (%d segments, %d trace entries)" %
                  (name, len(snapshot["segments"]), events))
        except Exception as error:
            print("%s load: FAIL %s: %s" % (name, type(error).__name__, error))
            failures += 1
            continue
        if viz is None:
            print("%s plots: SKIPPED (torch.cuda._memory_viz not importable: %s)" % (name, skipped))
            continue
        identity = lambda lines: lines  # noqa: E731 (stands in for flamegraph.pl)
        checks = [
            ("trace_plot", lambda: viz.trace_plot(snapshot), True),
            ("trace_plot(plot_segments=True)",
             lambda: viz.trace_plot(snapshot, plot_segments=True), True),
            ("segment_plot", lambda: viz.segment_plot(snapshot), True),
        ]
        for function in ("segsum", "trace"):
            if hasattr(viz, function):
                checks.append((function, lambda f=getattr(viz, function): f(snapshot), False))
        for function in ("memory", "segments"):
            if hasattr(viz, function):
                checks.append((function, lambda f=getattr(viz, function):
                               f(snapshot, format_flamegraph=identity), False))
        for label, call, html in checks:
            try:
                result = call()
                if not isinstance(result, str):
                    raise TypeError("returned %s, not str" % type(result).__name__)
                if html and "<html" not in result.lower():
                    raise ValueError("no <html> in what it returned")
                kind = "of HTML" if html else "of text"
                print("%s %s: ok (%d chars %s)" % (name, label, len(result), kind))
            except Exception as error:
                print("%s %s: FAIL %s: %s" % (name, label, type(error).__name__,
                                              str(error).splitlines()[0] if str(error) else ""))
                failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
