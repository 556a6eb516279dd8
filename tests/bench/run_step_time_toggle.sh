#!/usr/bin/env bash
# Step time of samples/pytorch/train_mlp.py's steps with gpumem recording against without, measured
# inside one process (GPU only): under the benchmarks' build, libgpumem_bench.so (the shipped
# libgpumem.so has no pause), tests/bench/step_time_timed.py pauses and resumes recording
# (gpumem_bench_set_recording) at each 25-step window, in the order off on on off ..., so each
# adjacent pair of windows holds one of each and a drift of the machine cancels. What differs
# between processes (where the kernel placed memory, which cores, the VM's neighbours: far more than
# the effect, tests/bench/RESULTS.md) is the same for both halves of a pair.
# A paused gpumem still has its hooks in place (each forwards at once) and its CUPTI callbacks
# off; what that leaves is measured by run_step_time.sh's `disabled` arm.
# Prints (tests/bench/toggle_summary.py) the median over all pairs of every process of (window
# with recording / window without), for wall time and for all threads' CPU time, with a 95 %
# interval from a bootstrap over processes, and the same for an A/A control run (both windows
# paused: the method's own bias; GPUMEM_BENCH_TOGGLE_AA=1). OUT_DIR keeps each process's line.
# Usage: tests/bench/run_step_time_toggle.sh [BUILD_DIR] [PROCESSES] [STEPS] [OUT_DIR]
# TOGGLE_AA=0 leaves the A/A control out (to compare settings, GPUMEM_* exported, in less time).
set -euo pipefail
build=${1:-build}
build=$(realpath -m "$build")  # absolute: a relative or absolute BUILD_DIR alike
processes=${2:-5}
steps=${3:-1001}
out=${4:-$(mktemp -d)}
python=${PYTHON:-python3}
source "$(dirname "$0")/pin.sh"
mkdir -p "$out"
: >"$out/toggle.txt"
: >"$out/toggle_aa.txt"
run() {
  env PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "$@" \
    LD_PRELOAD="$build/lib/libgpumem_bench.so" PYTHONPATH="$build/lib/python" \
    GPUMEM_OUTPUT="$out/toggle.trace" "${pin[@]}" $python tests/bench/step_time_timed.py "$steps" |
    tail -1
}
for ((i = 0; i < processes; i++)); do
  run >>"$out/toggle.txt"
  [[ ${TOGGLE_AA:-1} == 0 ]] || run GPUMEM_BENCH_TOGGLE_AA=1 >>"$out/toggle_aa.txt"
done
rm -f "$out/toggle.trace"
# The summary (tests/bench/toggle_summary.py) can be printed again from OUT_DIR's files.
$python "$(dirname "$0")/toggle_summary.py" "$out" --header \
  "step_time_toggle: train_mlp.py, backend:cudaMallocAsync, $processes processes x $steps steps, windows of 25 steps, off/on in ABBA order, ${pin[*]:-unpinned}; ratio = median over pairs of on / off"
