"""The allocator models against PyTorch on the GPU machine's runs (tests/gpu/run.sh, `allocators`).

For each training script: the native model replayed over its tensor-level trace (`gpumem whatif`)
against PyTorch's own figures, and for the capped scripts whether `whatif` predicted the real
outcome. Targets (issue 6): modelled peak allocated within 0.5 % of the tensor-level run's
max_memory_allocated(); modelled peak reserved within 2 % of the default run's
max_memory_reserved() where both runs asked for the same tensors (same count and same peak);
where they did not, both figures are shown, not judged. Prints one table; exits 1 on a miss.

Usage: compare_allocators.py OUT_DIR GPUMEM
"""

import json
import os
import subprocess
import sys

SCRIPTS = ("train_mlp", "train_cnn", "train_transformer")
CAPPED = ("train_cnn", "train_transformer")


def last_json(path):
    with open(path) as lines:
        return json.loads(lines.read().strip().splitlines()[-1])


def whatif(gpumem, trace, device_memory="80GiB"):
    result = subprocess.run([gpumem, "whatif", "--json", "--allocator", "native",
                             "--device-memory", str(device_memory), trace],
                            capture_output=True, text=True)
    if result.returncode not in (0, 1):
        raise RuntimeError(f"gpumem whatif {trace}: {result.stderr.strip()}")
    return json.loads(result.stdout)["allocators"][0]["devices"][0]


def native_segment_size(size):
    """The segment PyTorch's native allocator asks the driver for, for a request of `size`
    (report/allocator_model.h): its OOM message names this, not the tensor's size."""
    rounded = max(512, (size + 511) // 512 * 512)
    if rounded <= 1 << 20:
        return 2 << 20
    if rounded < 10 << 20:
        return 20 << 20
    return (rounded + (2 << 20) - 1) // (2 << 20) * (2 << 20)


def script_line(frames, script):
    """The innermost frame of the script itself in a whatif stack: its line."""
    for frame in frames:
        if os.path.basename(frame.get("file", "")) == f"{script}.py":
            return frame.get("line")
    return None


def main():
    out, gpumem = sys.argv[1], sys.argv[2]
    failures = []
    print(f"{'script':<18} {'tensors':>7} {'default':>7}  {'max_alloc (tensors run)':>24} "
          f"{'modelled':>10} {'diff':>7}  {'max_reserved (default run)':>27} {'modelled':>10} {'diff':>7}")
    for script in SCRIPTS:
        trace = f"{out}/alloc_{script}_tensors/alloc_{script}_tensors.trace"
        tensors_run = last_json(f"{out}/alloc_{script}_tensors/stdout")
        default_run = last_json(f"{out}/alloc_{script}_default/stdout")
        model = whatif(gpumem, trace)
        alloc_diff = model["allocated_peak_bytes"] / tensors_run["max_memory_allocated"] - 1
        reserved_diff = model["reserved_peak_bytes"] / default_run["max_memory_reserved"] - 1
        same_tensors = (model["allocations"] == default_run["allocation.all.allocated"] and
                        tensors_run["max_memory_allocated"] == default_run["max_memory_allocated"])
        print(f"{script:<18} {model['allocations']:>7} {default_run['allocation.all.allocated']:>7}  "
              f"{tensors_run['max_memory_allocated']:>24} {model['allocated_peak_bytes']:>10} "
              f"{alloc_diff:>+7.3%}  {default_run['max_memory_reserved']:>27} "
              f"{model['reserved_peak_bytes']:>10} {reserved_diff:>+7.3%}")
        if abs(alloc_diff) > 0.005:
            failures.append(f"{script}: modelled peak allocated {alloc_diff:+.3%} off")
        if same_tensors:
            if abs(reserved_diff) > 0.02:
                failures.append(f"{script}: modelled peak reserved {reserved_diff:+.3%} off")
        else:
            print(f"  {script}: the two runs asked for different tensors: {model['allocations']} "
                  f"tensors and peak {tensors_run['max_memory_allocated']} at tensor level, "
                  f"{default_run['allocation.all.allocated']} and peak "
                  f"{default_run['max_memory_allocated']} under the default allocator "
                  f"(reserved not judged)")
    print("capped with set_per_process_memory_fraction at whatif's smallest fit S and at S - 2 MiB:")
    for script in CAPPED:
        trace = f"{out}/alloc_{script}_tensors/alloc_{script}_tensors.trace"
        smallest = whatif(gpumem, trace)["smallest_fit_bytes"]
        at_fit = last_json(f"{out}/alloc_{script}_cap_fit.txt")
        below = last_json(f"{out}/alloc_{script}_cap_below.txt")
        predicted = whatif(gpumem, trace, smallest - (2 << 20))
        oom = predicted.get("oom") or {}
        predicted_line = script_line(oom.get("frames", []), script)
        print(f"  {script}: S = {smallest} bytes; at S the run {'ran out' if at_fit['oom'] else 'fit'}"
              f" (whatif: fits); at S - 2 MiB it "
              f"{'ran out at step %s, line %s, asking %s bytes' % (below['oom_step'], below['oom_line'], below['oom_requested_bytes']) if below['oom'] else 'fit'}"
              f" (whatif: {'runs out at line %s asking %s bytes' % (predicted_line, oom.get('size')) if not predicted['fits'] else 'fits'})")
        if at_fit["oom"]:
            failures.append(f"{script}: ran out at whatif's smallest fit {smallest}")
        if not below["oom"] or predicted["fits"]:
            failures.append(f"{script}: 2 MiB below the smallest fit: real oom={below['oom']}, "
                            f"whatif fits={predicted['fits']}")
        elif below["oom_line"] != predicted_line:
            failures.append(f"{script}: ran out at line {below['oom_line']}, whatif said line "
                            f"{predicted_line}")
        elif below["oom_requested_bytes"] is not None and oom.get("size") is not None and all(
                abs(below["oom_requested_bytes"] - size) > max(0.005 * size, 10 << 10)
                for size in (oom["size"], native_segment_size(oom["size"]))):
            # PyTorch prints the segment it asked for, with two decimals of its unit.
            failures.append(f"{script}: PyTorch tried to allocate {below['oom_requested_bytes']}, "
                            f"whatif's request {oom['size']} (segment "
                            f"{native_segment_size(oom['size'])})")
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
