"""`gpumem advise` against real runs on the GPU machine (tests/gpu/run.sh, `advise`).

Usage: check_advise.py OUT_DIR GPUMEM     (reads OUT_DIR/advise, runs GPUMEM advise here)
       check_advise.py --self-test        (the checks on made-up runs and a stand-in gpumem)

For train_transformer.py and train_cnn.py: `advise --device-memory BUDGET` of the two recorded
batch sizes must answer, for the native allocator, the largest batch that really fitted under that
cap (tests/gpu/largest_batch.py's search) or one less, never more. For growing_list.py and
no_grad_eval.py: advise of the unfixed script's recording must name the remedy (release_growing at
the allocating line, kept by the append line; free_after_last_use at the forward line: the lines
marked `# advise: ...` in the scripts) with a modelled saving within 2 % of the measured one (the
unfixed run's max_memory_reserved() less the fixed run's, both without gpumem), advise run with
a device between the two. The transformer run at a batch that does not fit 8 GiB (the README's
worked example) must have run out of memory, and every trace must be under 20 MB. Prints markdown
tables, also written to OUT_DIR/advise/table.md; exits 1 if a check failed.
"""

import contextlib
import glob
import io
import json
import os
import re
import subprocess
import sys
import tempfile

SAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "samples", "pytorch")
BATCH_SCRIPTS = (("transformer", "train_transformer.py"), ("cnn", "train_cnn.py"))
# (folder, script, remedy kind, marker of the remedy's user line, marker of the holder's line)
REMEDY_SCRIPTS = (
    ("growing_list", "growing_list.py", "release_growing", "allocating line", "holder line"),
    ("no_grad_eval", "no_grad_eval.py", "free_after_last_use", "forward line", None),
)
SAVING_TOLERANCE = 0.02
LARGEST_TRACE = 20_000_000


class CheckError(Exception):
    """Something the check could not read or run: a failure of the check, with its reason."""


def marker_line(script, marker, samples=SAMPLES):
    """The number of the one line of samples/pytorch/SCRIPT that carries `# advise: MARKER`."""
    with open(os.path.join(samples, script)) as lines:
        found = [number for number, line in enumerate(lines, 1)
                 if line.rstrip().endswith(f"# advise: {marker}")]
    if len(found) != 1:
        raise CheckError(f"{script}: {len(found)} lines marked `# advise: {marker}`, not one")
    return found[0]


def last_json(path):
    """The last line of a run's output, as the JSON object the samples end with."""
    try:
        with open(path) as text:
            return json.loads(text.read().strip().splitlines()[-1])
    except (OSError, IndexError, ValueError) as error:
        raise CheckError(f"{path}: no JSON line ({error})") from error


def advise(gpumem, device_memory, traces):
    """`gpumem advise --json --device-memory N TRACES...`: (exit code, its JSON)."""
    command = [gpumem, "advise", "--json", "--device-memory", str(device_memory)] + traces
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode not in (0, 1):
        raise CheckError(f"{' '.join(command)}: exit {result.returncode}: {result.stderr.strip()}")
    try:
        return result.returncode, json.loads(result.stdout)
    except ValueError as error:
        raise CheckError(f"{' '.join(command)}: not JSON ({error})") from error


def size(bytes_):
    if abs(bytes_) >= 1 << 30:
        return f"{bytes_ / (1 << 30):.2f} GiB"
    return f"{bytes_ / (1 << 20):.1f} MiB"


def recorded_traces(folder):
    """{batch size: trace} of the recordings FOLDER/bN/bN.trace."""
    traces = {}
    for trace in glob.glob(os.path.join(folder, "b[0-9]*", "b[0-9]*.trace")):
        traces[int(re.fullmatch(r"b(\d+)\.trace", os.path.basename(trace)).group(1))] = trace
    return traces


def check_batch(advise_dir, gpumem, name, script):
    """One training script's row of the batch table, and its failures."""
    folder = os.path.join(advise_dir, name)
    with open(os.path.join(folder, "search", "search.json")) as text:
        search = json.load(text)
    real, budget, tried = search["largest"], search["budget"], search["tried"]
    traces = recorded_traces(folder)
    failures = []
    if any(run["report"] is None for run in search["runs"]) or not real:
        failures.append(f"{script}: the search did not find the largest batch (runs without a "
                        f"JSON line, or none fitted): tried {tried}")
    if len(tried) < 5:
        failures.append(f"{script}: only {len(tried)} batch sizes run, not at least five")
    if len(traces) != 2 or real in traces:
        failures.append(f"{script}: recorded batch sizes {sorted(traces)}: not two, other than "
                        f"the answer {real}")
    sizes = sorted(traces, reverse=True)
    _, result = advise(gpumem, budget, [traces[batch] for batch in sizes])
    answers = {entry["allocator"]: entry["batch"]
               for entry in ((result.get("batch") or {}).get("largest") or [])}
    native = answers.get("native")
    if native is None:
        failures.append(f"{script}: advise gave no largest batch for the native allocator "
                        f"(batch: {result.get('batch')})")
    elif not real - 1 <= native <= real:
        failures.append(f"{script}: advise says batch {native} fits under {budget} bytes; "
                        f"the largest that really fitted is {real}")
    read_sizes = (result.get("batch") or {}).get("sizes")
    if read_sizes is not None and sorted(read_sizes) != sorted(sizes):
        failures.append(f"{script}: advise read batch sizes {read_sizes}, recorded {sizes}")
    row = {
        "script": script, "budget": f"{size(budget)} ({budget})",
        "real": f"{real} (tried {', '.join(map(str, tried))})" +
                (f"; completed only by catching an out-of-memory error: "
                 f"{search['completed_with_ooms']}" if search.get("completed_with_ooms") else ""),
        "advise": ", ".join(f"{allocator} {batch}" for allocator, batch in answers.items())
                  or "none",
        "recorded": ", ".join(map(str, sizes)),
        "result": "ok" if not failures else "FAIL",
    }
    return row, failures


def find_remedy(remedies, kind, script, line):
    """The best-ranked remedy of `kind` whose user frame is SCRIPT:LINE, or None."""
    for remedy in remedies:
        frame = remedy.get("user_frame") or {}
        if (remedy.get("kind") == kind and os.path.basename(str(frame.get("file"))) == script
                and frame.get("line") == line):
            return remedy
    return None


def check_remedy(advise_dir, gpumem, name, script, kind, line_marker, holder_marker):
    """One remedy script's row of the remedy table, and its failures."""
    folder = os.path.join(advise_dir, name)
    line = marker_line(script, line_marker)
    unfixed = last_json(os.path.join(folder, "unfixed.json"))["max_memory_reserved"]
    fixed = last_json(os.path.join(folder, "fixed.json"))["max_memory_reserved"]
    measured = unfixed - fixed
    # A device that the unfixed run does not fit and the fixed one does: where the remedy matters.
    device_memory = (unfixed + fixed) // 2
    _, result = advise(gpumem, device_memory, [os.path.join(folder, "tensors", "tensors.trace")])
    remedy = find_remedy(result.get("remedies") or [], kind, script, line)
    failures, where = [], f"{script}:{line}"
    if remedy is None:
        found = [(r.get("kind"), (r.get("user_frame") or {}).get("file"),
                  (r.get("user_frame") or {}).get("line")) for r in result.get("remedies") or []]
        failures.append(f"{script}: no {kind} remedy at {where}; remedies: {found}")
        modelled = None
    else:
        modelled = remedy["saving"]
        if abs(modelled - measured) > SAVING_TOLERANCE * abs(measured):
            failures.append(f"{script}: modelled saving {modelled} bytes, measured {measured} "
                            f"(more than {SAVING_TOLERANCE:.0%} apart)")
        if holder_marker:
            holder_line = marker_line(script, holder_marker)
            holder = remedy.get("holder") or ""
            where += f", kept by {holder or 'nothing named'}"
            if not re.search(rf"(^|/){re.escape(script)}:{holder_line}\b", holder):
                failures.append(f"{script}: the holder is `{holder}`, not {script}:{holder_line}")
    if measured <= 0:
        failures.append(f"{script}: the fix saved nothing ({unfixed} -> {fixed} bytes reserved)")
    row = {
        "script": script,
        "remedy": f"{kind}: {remedy['change']}" if remedy else f"{kind}: none",
        "where": where,
        "modelled": f"{size(modelled)} ({modelled})" if modelled is not None else "none",
        "measured": f"{size(measured)} ({unfixed} - {fixed})",
        "difference": f"{modelled / measured - 1:+.2%}" if modelled is not None and measured
                      else "",
        "result": "ok" if not failures else "FAIL",
    }
    return row, failures


def table(rows, columns):
    lines = ["| " + " | ".join(title for title, _ in columns) + " |",
             "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(row[key]) for _, key in columns) + " |" for row in rows]
    return "\n".join(lines)


BATCH_COLUMNS = (("script", "script"), ("budget (--memory-limit)", "budget"),
                 ("real largest batch", "real"),
                 ("advise: largest batch, per allocator", "advise"),
                 ("recorded batch sizes", "recorded"), ("", "result"))
REMEDY_COLUMNS = (("script", "script"), ("remedy", "remedy"), ("line", "where"),
                  ("modelled saving", "modelled"),
                  ("measured saving (max_memory_reserved, unfixed - fixed)", "measured"),
                  ("difference", "difference"), ("", "result"))


def check_worked_example(advise_dir, gpumem):
    """The transformer run at a batch that does not fit 8 GiB, under `gpumem record`: it must have
    run out of memory; and `gpumem advise` on that batch recorded uncapped with the recording at
    batch 16 must say it does not fit and offer a change that fits. Returns its description (the
    advice's text included, for the README) and failures."""
    runs = glob.glob(os.path.join(advise_dir, "transformer", "oom_b*", "stdout"))
    if len(runs) != 1:
        return "", [f"the worked example: {len(runs)} runs of the transformer that does not "
                    f"fit, not one"]
    report = last_json(runs[0])
    outcome = (f"out of memory at step {report.get('oom_step')}, line {report.get('oom_line')}, "
               f"asking {report.get('oom_requested_bytes')} bytes" if report.get("oom") else "fits")
    text = (f"Worked example ({os.path.relpath(os.path.dirname(runs[0]), advise_dir)}): "
            f"train_transformer.py at batch {report.get('batch')} under "
            f"--memory-limit {report.get('memory_limit')}: {outcome}")
    failures = [] if report.get("oom") else ["the worked example did not run out of memory"]
    batch = report.get("batch")
    example = os.path.join(advise_dir, "transformer", f"example_b{batch}", f"example_b{batch}.trace")
    second = os.path.join(advise_dir, "transformer", "b16", "b16.trace")
    if not os.path.exists(example) or not os.path.exists(second):
        return text, failures + [f"the worked example: {example} or {second} missing"]
    command = [gpumem, "advise", "--device-memory", "8GiB", example, second]
    advice = subprocess.run(command, capture_output=True, text=True)
    exit_code, result = advise(gpumem, 8 << 30, [example, second])
    if exit_code != 1 or advice.returncode != 1:
        failures.append(f"the worked example: advise exit {exit_code}, not 1 (does not fit)")
    if not any(remedy.get("fits") for remedy in result.get("remedies") or []):
        failures.append("the worked example: advise offers no change that fits")
    with open(os.path.join(advise_dir, "worked_example.txt"), "w") as out:
        out.write("$ " + " ".join(command) + "\n" + advice.stdout)
    return text + "\n\n```\n$ gpumem advise --device-memory 8GiB ...\n" + advice.stdout + "```", failures


def check_trace_sizes(advise_dir):
    return [f"{trace}: {os.path.getsize(trace)} bytes, not under {LARGEST_TRACE}"
            for trace in glob.glob(os.path.join(advise_dir, "**", "*.trace"), recursive=True)
            if os.path.getsize(trace) >= LARGEST_TRACE]


def check(out, gpumem):
    """The whole check of OUT/advise; prints the tables and failures, returns the exit code."""
    advise_dir = os.path.join(out, "advise")
    if not os.path.isdir(advise_dir):
        print(f"{advise_dir}: not recorded (tests/gpu/run.sh advise {out})")
        return 2
    failures, batch_rows, remedy_rows = [], [], []
    for rows, checks in (
            (batch_rows, [(check_batch, (name, script)) for name, script in BATCH_SCRIPTS]),
            (remedy_rows, [(check_remedy, spec) for spec in REMEDY_SCRIPTS])):
        for function, spec in checks:
            try:
                row, failed = function(advise_dir, gpumem, *spec)
                rows.append(row)
                failures += failed
            except (CheckError, OSError, KeyError, TypeError, ValueError) as error:
                failures.append(f"{spec[1]}: {error.__class__.__name__}: {error}")
    example, failed = check_worked_example(advise_dir, gpumem)
    failures += failed + check_trace_sizes(advise_dir)
    text = ("Largest batch under a memory cap: real runs against `gpumem advise` of two recorded "
            "batch sizes\n\n" + table(batch_rows, BATCH_COLUMNS) + f"\n\n{example}" +
            "\n\nRemedies: modelled by `gpumem advise` against the fixed script's real saving\n\n" +
            table(remedy_rows, REMEDY_COLUMNS) + "\n")
    print(text)
    with open(os.path.join(advise_dir, "table.md"), "w") as markdown:
        markdown.write(text)
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures else 0


# ---- the self-test: made-up runs, and a stand-in gpumem answering from a file (its Python
# without site: it needs the standard library only, and starts faster) ----

FAKE_GPUMEM = f"""#!{sys.executable} -S
import json, os, sys
answers = json.load(open(os.path.join(os.path.dirname(sys.argv[0]), "answers.json")))
folder = os.path.basename(os.path.dirname(os.path.dirname(sys.argv[-1])))
if any("example_b" in argument for argument in sys.argv):
    folder = "example"
answer = answers[folder]
print(json.dumps(answer["json"]))
sys.exit(answer.get("exit", 0))
"""


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as out:
        out.write(text)


def make_runs(out):
    """OUT/advise as run.sh leaves it: the searches, recordings and the remedy scripts' runs."""
    for name, largest in (("transformer", 130), ("cnn", 57)):
        tried = [16, 32, 64, 128, 256, 146, largest, largest + 1]
        runs = [{"batch": batch, "round": 1, "fits": batch <= largest, "exit_code": 0,
                 "report": {"oom": batch > largest, "num_ooms": int(batch > largest)}}
                for batch in tried]
        write(f"{out}/advise/{name}/search/search.json", json.dumps(
            {"budget": 8589934592, "largest": largest, "tried": sorted(tried), "runs": runs,
             "completed_with_ooms": [], "non_monotonic": []}))
        for batch in (8, 16):
            write(f"{out}/advise/{name}/b{batch}/b{batch}.trace", "")
    write(f"{out}/advise/transformer/example_b256/example_b256.trace", "")
    write(f"{out}/advise/transformer/oom_b256/stdout", "gpumem: a line\n" + json.dumps(
        {"batch": 256, "memory_limit": 8589934592, "oom": True, "oom_step": 0, "oom_line": 42,
         "oom_requested_bytes": 1 << 30}))
    for name, unfixed, fixed in (("growing_list", 1400000000, 100000000),
                                 ("no_grad_eval", 2300000000, 200000000)):
        write(f"{out}/advise/{name}/tensors/tensors.trace", "")
        write(f"{out}/advise/{name}/unfixed.json", json.dumps({"max_memory_reserved": unfixed}))
        write(f"{out}/advise/{name}/fixed.json",
              "a line\n" + json.dumps({"max_memory_reserved": fixed}))


def good_answers():
    """What a correct advise answers on make_runs' recordings."""
    def batch(native):
        return {"json": {"batch": {"sizes": [16, 8], "largest": [
            {"allocator": "native", "batch": native, "peak": 1},
            {"allocator": "expandable", "batch": native + 3, "peak": 1}]}}}

    def remedy(kind, script, line, saving, holder=None):
        other = {"rank": 1, "kind": "allocator", "change": "expandable segments", "saving": 5}
        return {"exit": 1, "json": {"remedies": [other, {
            "rank": 2, "kind": kind, "change": "release it", "saving": saving,
            "user_frame": {"file": f"/x/samples/pytorch/{script}", "line": line},
            "holder": holder}]}}

    grow, keep = marker_line("growing_list.py", "allocating line"), marker_line(
        "growing_list.py", "holder line")
    forward = marker_line("no_grad_eval.py", "forward line")
    return {
        "transformer": batch(130), "cnn": batch(56),
        "growing_list": remedy("release_growing", "growing_list.py", grow, 1290000000,
                               f"growing_list.py:{keep} in main"),
        "no_grad_eval": remedy("free_after_last_use", "no_grad_eval.py", forward, 2090000000),
        "example": {"exit": 1, "json": {"remedies": [{"kind": "batch", "fits": True}]}},
    }


def search_without_json(out):
    path = f"{out}/advise/transformer/search/search.json"
    with open(path) as text:
        search = json.load(text)
    search["runs"][-1]["report"] = None
    write(path, json.dumps(search))


def search_with_tried(out, tried):
    path = f"{out}/advise/transformer/search/search.json"
    with open(path) as text:
        search = json.load(text)
    write(path, json.dumps(dict(search, tried=tried)))


def self_test():
    """check() on made-up runs: passes on good answers, fails on each kind of wrong one."""
    def mutate(folder, change):
        answers = good_answers()
        change(answers[folder]["json"])
        return answers

    def set_native(value):
        return lambda answer: answer["batch"]["largest"][0].update(batch=value)

    def set_remedy(**fields):
        return lambda answer: answer["remedies"][1].update(fields)

    cases = [  # (what, answers, expected exit code)
        ("good answers", good_answers(), 0),
        ("one more than fits", mutate("transformer", set_native(131)), 1),
        ("two fewer than fits", mutate("cnn", set_native(55)), 1),
        ("no native answer", mutate("cnn", lambda answer: answer["batch"]["largest"].pop(0)), 1),
        ("no batch answer", mutate("transformer", lambda answer: answer.update(batch=None)), 1),
        ("other batch sizes read", mutate("cnn", lambda a: a["batch"].update(sizes=[16, 4])), 1),
        ("saving 1.9 % over", mutate("growing_list", set_remedy(saving=1325100000)), 0),
        ("saving 2.1 % under", mutate("growing_list", set_remedy(saving=1272700000)), 1),
        ("saving 3 % over", mutate("no_grad_eval", set_remedy(saving=2163000000)), 1),
        ("remedy at another line", mutate("no_grad_eval", set_remedy(
            user_frame={"file": "no_grad_eval.py", "line": 1})), 1),
        ("remedy of another kind", mutate("growing_list", set_remedy(kind="batch")), 1),
        ("holder at another line", mutate("growing_list", set_remedy(
            holder="growing_list.py:1 in main")), 1),
        ("no holder", mutate("growing_list", set_remedy(holder=None)), 1),
        ("advise fails", dict(good_answers(), cnn={"exit": 2, "json": {}}), 1),
    ]
    runs_cases = [  # (what, change to the runs, expected exit code)
        ("the worked example fits", lambda out: write(
            f"{out}/advise/transformer/oom_b256/stdout", json.dumps({"oom": False})), 1),
        ("no worked example",
         lambda out: os.remove(f"{out}/advise/transformer/oom_b256/stdout"), 1),
        ("a trace of 20 MB", lambda out: os.truncate(
            f"{out}/advise/cnn/b8/b8.trace", LARGEST_TRACE), 1),
        ("a trace just under 20 MB", lambda out: os.truncate(
            f"{out}/advise/cnn/b8/b8.trace", LARGEST_TRACE - 1), 0),
        ("a search run without a JSON line", lambda out: search_without_json(out), 1),
        ("four batch sizes run", lambda out: search_with_tried(out, [16, 32, 130, 131]), 1),
        ("the answer recorded", lambda out: write(f"{out}/advise/cnn/b57/b57.trace", ""), 1),
    ]
    cases += [(what, good_answers(), expected, change) for what, change, expected in runs_cases]
    failed = 0
    for what, answers, expected, *change in cases:
        with tempfile.TemporaryDirectory() as out:
            make_runs(out)
            for step in change:
                step(out)
            gpumem = os.path.join(out, "gpumem")
            write(gpumem, FAKE_GPUMEM)
            os.chmod(gpumem, 0o755)
            write(os.path.join(out, "answers.json"), json.dumps(answers))
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                code = check(out, gpumem)
            has_table = os.path.exists(os.path.join(out, "advise", "table.md"))
        # A pass shows every row ok; a failure, its FAIL line.
        ok = code == expected and has_table and (
            printed.getvalue().count("| ok |") == 4 if expected == 0
            else "FAIL: " in printed.getvalue())
        print(f"{'ok  ' if ok else 'FAIL'} {what}: exit {code}, expected {expected}")
        if not ok:
            print(printed.getvalue())
            failed += 1
    with tempfile.TemporaryDirectory() as out, contextlib.redirect_stdout(io.StringIO()):
        missing = check(out, "gpumem")
    print(f"{'ok  ' if missing == 2 else 'FAIL'} no advise folder: exit {missing}, expected 2")
    failed += missing != 2
    print(f"{len(cases) + 1 - failed} passed, {failed} failed")
    return 1 if failed else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    return check(argv[1], argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
