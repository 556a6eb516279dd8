#!/usr/bin/env bash
# Two builds' step-time ratios, interleaved (GPU only): run_step_time_toggle.sh's in-process
# measurement, one process of build A, then one of build B, PROCESSES times over, so that a drift of
# the machine reaches both alike; then each build's summary (toggle_summary.py: the median, its 95 %
# interval from a bootstrap over processes, and whether that is under the 1.05x target). With
# TOGGLE_AA=1, each process of B is followed by an A/A control process of B.
# OUT_DIR/a and OUT_DIR/b keep the processes' lines, to pool with other runs (toggle_summary.py
# takes several directories).
# Usage: tests/bench/run_step_time_ab.sh BUILD_A BUILD_B [PROCESSES] [STEPS] [OUT_DIR]
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 BUILD_A BUILD_B [PROCESSES] [STEPS] [OUT_DIR]" >&2; exit 2; }
build_a=$1
build_b=$2
processes=${3:-8}
steps=${4:-1001}
out=${5:-$(mktemp -d)}
python=${PYTHON:-python3}
here=$(dirname "$0")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$out/a" "$out/b"
: >"$out/a/toggle.txt"
: >"$out/b/toggle.txt"
: >"$out/b/toggle_aa.txt"
one() {  # BUILD DESTINATION_FILE [ENV...]: one process's line appended
  local build=$1 destination=$2
  shift 2
  env TOGGLE_AA=0 "$@" "$here/run_step_time_toggle.sh" "$build" 1 "$steps" "$scratch" >/dev/null
  cat "$scratch/toggle.txt" >>"$destination"
}
for ((i = 0; i < processes; i++)); do
  one "$build_a" "$out/a/toggle.txt"
  one "$build_b" "$out/b/toggle.txt"
  [[ ${TOGGLE_AA:-0} == 0 ]] || one "$build_b" "$out/b/toggle_aa.txt" GPUMEM_BENCH_TOGGLE_AA=1
done
for side in a b; do
  build=$build_a
  [[ $side == b ]] && build=$build_b
  $python "$here/toggle_summary.py" "$out/$side" --header \
    "step_time_ab $side: $build, $processes processes x $steps steps, interleaved with the other build"
done
