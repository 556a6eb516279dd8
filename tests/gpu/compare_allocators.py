"""The allocator models against PyTorch on the GPU machine's runs (tests/gpu/run.sh, `allocators`).

For each training script: the native model replayed over its tensor-level trace (`gpumem whatif`)
against PyTorch's own figures, and for the capped scripts whether `whatif` predicted the real
outcome. Targets: modelled peak allocated within 0.5 % of the tensor-level run's
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
    (report/allocator/allocator_model.h): its OOM message names this, not the tensor's size."""
    rounded = max(512, (size + 511) // 512 * 512)
    if rounded <= 1 << 20:
        return 2 << 20
    if rounded < 10 << 20:
        return 20 << 20
    return (rounded + (2 << 20) - 1) // (2 << 20) * (2 << 20)


def tensor_allocation_seqs(gpumem, trace):
    """The seq of every tensor allocation of a tensor-level trace, in order."""
    dump = subprocess.run([gpumem, "dump", trace], capture_output=True, text=True, check=True)
    seqs = []
    for line in dump.stdout.splitlines():
        if " memory seq=" in line and " alloc pool " in line:
            seqs.append(int(line.split(" seq=")[1].split()[0]))
    return seqs


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
        # The same tensors: as many, and the same peak once rounded as the native allocator rounds
        # (the async backend counts the bytes asked for, the native one 512-byte blocks).
        same_tensors = (model["allocations"] == default_run["allocation.all.allocated"] and
                        model["allocated_peak_bytes"] == default_run["max_memory_allocated"])
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
    print("capped with set_per_process_memory_fraction (whatif --device-memory CAP): S = whatif's "
          "smallest fit; the boundary (S, S - 2 MiB) is shown, 3/4 S and 5/4 S are judged")
    for script in CAPPED:
        trace = f"{out}/alloc_{script}_tensors/alloc_{script}_tensors.trace"
        smallest = whatif(gpumem, trace)["smallest_fit_bytes"]
        tensor_seqs = tensor_allocation_seqs(gpumem, trace)
        for cap, judged in ((smallest, False), (smallest - (2 << 20), False),
                            (smallest // 4 * 3, True), (smallest // 4 * 5, True)):
            real = last_json(f"{out}/alloc_{script}_cap_{cap}.txt")
            model = whatif(gpumem, trace, cap)
            oom = model.get("oom") or {}
            # Where: the how-many-th tensor request failed (PyTorch counts the ones that
            # succeeded before it), and its size.
            model_where = (sum(1 for seq in tensor_seqs if seq < oom["seq"]), oom["size"]) if oom else None
            real_where = (real["allocation.all.allocated"], real["oom_requested_bytes"]) if real["oom"] else None
            agree = (model_where is None) == (real_where is None) and (
                model_where is None or (model_where[0] == real_where[0] and
                                        real_where[1] in (model_where[1], native_segment_size(model_where[1]))))
            describe = lambda where: (f"runs out at tensor {where[0] + 1} asking {where[1]} bytes"
                                      if where else "fits")
            line = f" (line {real['oom_line']})" if real.get("oom") else ""
            print(f"  {script} at {cap} bytes{'' if judged else ' (boundary)'}: PyTorch "
                  f"{describe(real_where)}{line}, retries {real['num_alloc_retries']}; whatif "
                  f"{describe(model_where)}, retries {oom.get('retries', model['num_alloc_retries'])}: "
                  f"{'agree' if agree else 'DIFFER'}")
            if judged and not agree:
                failures.append(f"{script} capped at {cap}: PyTorch {describe(real_where)}, "
                                f"whatif {describe(model_where)}")
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
