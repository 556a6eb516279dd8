"""The largest batch size of a training sample that fits under a memory cap, found by real runs.

Usage: largest_batch.py --budget BYTES --out DIR [--parallel N] [--start N] -- COMMAND...

Runs `COMMAND --batch B --memory-limit BYTES` (a sample of samples/pytorch/ on harness.py's
command line) for batch sizes chosen in rounds of N runs side by side: doubling from --start
(default 16) until one does not fit, then N sizes spread evenly between the largest that fits and
the smallest that does not, until they are neighbours. A run fits when it exits 0 and its JSON
line says it neither ran out of memory nor caught an out-of-memory error anywhere (num_ooms 0: cuDNN
retrying with a smaller workspace after one asked for other tensors than an uncapped run; such
runs are listed as `completed_with_ooms`). Each run's output goes to DIR/batch_B.out and .err;
DIR/search.json holds every run's JSON line and the answer:

  {"budget": BYTES, "command": [...], "largest": L, "tried": [B, ...],
   "runs": [{"batch": B, "round": R, "fits": bool, "exit_code": C, "report": {JSON line} | null}],
   "completed_with_ooms": [B, ...], "non_monotonic": [B, ...]}   (sizes above L that fit)

Exits 0 with an answer, 1 if a run failed otherwise (no JSON line) or not even batch 1 fits.
"""

import argparse
import json
import os
import subprocess
import sys

LARGEST_TRIED = 1 << 16  # a bound on the doubling, for a command that never runs out


def last_json(text):
    """The last line of `text` that is a JSON object, or None."""
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def next_batches(fits, parallel, start):
    """The batch sizes of the next round, given {batch: fits} so far: [] when the boundary is
    found (or nothing is left to try)."""
    too_large = min((batch for batch, ok in fits.items() if not ok), default=None)
    largest = max((batch for batch, ok in fits.items()
                   if ok and (too_large is None or batch < too_large)), default=0)
    if too_large is None:
        first = largest * 2 if largest else start
        return [first << k for k in range(parallel) if first << k <= LARGEST_TRIED]
    gap = too_large - largest
    count = min(parallel, gap - 1)
    return sorted({largest + round(gap * k / (count + 1)) for k in range(1, count + 1)})


def run_round(command, budget, batches, out):
    """Runs the command at each batch size side by side; returns {batch: (exit code, JSON)}."""
    running = {}
    for batch in batches:
        stdout = open(os.path.join(out, f"batch_{batch}.out"), "w")
        stderr = open(os.path.join(out, f"batch_{batch}.err"), "w")
        process = subprocess.Popen(
            command + ["--batch", str(batch), "--memory-limit", str(budget)],
            stdout=stdout, stderr=stderr)
        running[batch] = (process, stdout, stderr)
    results = {}
    for batch, (process, stdout, stderr) in running.items():
        code = process.wait()
        stdout.close()
        stderr.close()
        with open(os.path.join(out, f"batch_{batch}.out")) as text:
            results[batch] = (code, last_json(text.read()))
    return results


def fits_cleanly(code, report):
    return code == 0 and report is not None and not report.get("oom") and \
        report.get("num_ooms", 0) == 0


def search(command, budget, out, parallel, start):
    """The rounds of runs; returns the search.json object."""
    fits, runs = {}, []
    batches = next_batches(fits, parallel, start)
    round_number = 0
    while batches:
        round_number += 1
        for batch, (code, report) in sorted(run_round(command, budget, batches, out).items()):
            fits[batch] = fits_cleanly(code, report)
            runs.append({"batch": batch, "round": round_number, "fits": fits[batch],
                         "exit_code": code, "report": report})
            print(f"  batch {batch}: {'fits' if fits[batch] else 'does not fit'}"
                  f"{'' if report else f' (exit {code}, no JSON line)'}", flush=True)
        if any(run["report"] is None for run in runs):
            break
        batches = next_batches(fits, parallel, start)
    too_large = min((batch for batch, ok in fits.items() if not ok), default=None)
    largest = max((batch for batch, ok in fits.items()
                   if ok and (too_large is None or batch < too_large)), default=0)
    return {
        "budget": budget, "command": command, "largest": largest, "tried": sorted(fits),
        "runs": runs,
        "completed_with_ooms": sorted(run["batch"] for run in runs if run["report"] and
                                      not run["report"].get("oom") and not run["fits"]),
        "non_monotonic": sorted(batch for batch, ok in fits.items()
                                if ok and too_large is not None and batch > too_large),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--start", type=int, default=16)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.parallel < 1 or args.start < 1:
        parser.error("a COMMAND after --, --parallel and --start of at least 1")
    os.makedirs(args.out, exist_ok=True)
    result = search(command, args.budget, args.out, args.parallel, args.start)
    with open(os.path.join(args.out, "search.json"), "w") as out:
        json.dump(result, out, indent=1)
    failed = [run["batch"] for run in result["runs"] if run["report"] is None]
    print(f"largest batch under {args.budget} bytes: {result['largest']} (tried {result['tried']})"
          f"{f'; runs without a JSON line: {failed}' if failed else ''}")
    return 1 if failed or not result["largest"] else 0


if __name__ == "__main__":
    sys.exit(main())
