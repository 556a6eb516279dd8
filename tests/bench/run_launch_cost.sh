#!/usr/bin/env bash
# Added cost of recording per kernel launch: launch_cost run without gpumem and with gpumem in
# five settings — the default (a 30-frame stack on every launch), GPUMEM_LAUNCH_STACKS=0,
# GPUMEM_CUPTI_LAUNCHES=1 (CUPTI's launch callbacks on too), GPUMEM_CUPTI_POOLS=1 (CUPTI
# memory-pool records on) and GPUMEM_CUPTI=0 — interleaved,
# median over the runs. Uses the fake CUDA unless GPUMEM_BENCH_CUDA_LIBS names a directory holding the real
# libcuda.so.1 (on a GPU machine: /usr/lib/x86_64-linux-gnu). LAUNCH_COST_EVICT_KB=N (passed on to
# launch_cost) writes N KiB between launches, as a framework's own work does: gpumem's data is then
# cold as in a real program (figures: tests/bench/RESULTS.md, "Launch cost").
# Usage: tests/bench/run_launch_cost.sh [BUILD_DIR] [RUNS] [LAUNCHES]
set -euo pipefail
build=${1:-build}
runs=${2:-5}
launches=${3:-1000000}
libs=${GPUMEM_BENCH_CUDA_LIBS:-$build/lib/fake}
source "$(dirname "$0")/pin.sh"
trace_dir=$(mktemp -d)
trap 'rm -rf "$trace_dir"' EXIT

run() { LD_LIBRARY_PATH=$libs "$@" "${pin[@]}" "$build/tests/bench/launch_cost" "$launches" | sed 's/launch_ns=//'; }
with() { run env LD_PRELOAD="$build/lib/libgpumem.so" GPUMEM_OUTPUT="$trace_dir/run.trace" "$@"; }
plain=() stacks=() nostacks=() cupti_launches=() pools=() no_cupti=()
for ((i = 0; i < runs; i++)); do
  plain+=("$(run env)")
  stacks+=("$(with)")
  nostacks+=("$(with GPUMEM_LAUNCH_STACKS=0)")
  cupti_launches+=("$(with GPUMEM_CUPTI_LAUNCHES=1)")
  pools+=("$(with GPUMEM_CUPTI_POOLS=1)")
  no_cupti+=("$(with GPUMEM_CUPTI=0)")
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
p=$(median "${plain[@]}")
printf 'launch_cost: %d runs x %d launches (30 frames deep), CUDA from %s, %s, medians per launch\n' \
  "$runs" "$launches" "$libs" "${pin[*]:-unpinned}"
line() {
  awk -v name="$1" -v p="$p" -v w="$2" 'BEGIN {
    printf "  %-28s %6d ns -> %6d ns  added %5d ns  ratio %.2f\n", name ":", p, w, w - p, w / p }'
}
line "default (stack per launch)" "$(median "${stacks[@]}")"
line "GPUMEM_LAUNCH_STACKS=0" "$(median "${nostacks[@]}")"
line "GPUMEM_CUPTI_LAUNCHES=1" "$(median "${cupti_launches[@]}")"
line "GPUMEM_CUPTI_POOLS=1" "$(median "${pools[@]}")"
line "GPUMEM_CUPTI=0" "$(median "${no_cupti[@]}")"
