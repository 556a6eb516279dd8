#!/usr/bin/env bash
# Added cost of recording per kernel launch: launch_cost run without gpumem, with gpumem (a
# 30-frame stack on every launch), and with GPUMEM_LAUNCH_STACKS=0, A/B interleaved, median over
# the runs. Uses the fake CUDA unless GPUMEM_BENCH_CUDA_LIBS names a directory holding the real
# libcuda.so.1 (on a GPU machine: /usr/lib/x86_64-linux-gnu).
# Usage: tests/bench/run_launch_cost.sh [BUILD_DIR] [RUNS] [LAUNCHES]
set -euo pipefail
build=${1:-build}
runs=${2:-5}
launches=${3:-1000000}
libs=${GPUMEM_BENCH_CUDA_LIBS:-$build/lib/fake}
trace_dir=$(mktemp -d)
trap 'rm -rf "$trace_dir"' EXIT

run() { LD_LIBRARY_PATH=$libs "$@" "$build/tests/bench/launch_cost" "$launches" | sed 's/launch_ns=//'; }
plain=() stacks=() nostacks=()
for ((i = 0; i < runs; i++)); do
  plain+=("$(run env)")
  stacks+=("$(run env LD_PRELOAD="$build/lib/libgpumem.so" GPUMEM_OUTPUT="$trace_dir/a.trace")")
  nostacks+=("$(run env LD_PRELOAD="$build/lib/libgpumem.so" GPUMEM_OUTPUT="$trace_dir/b.trace" GPUMEM_LAUNCH_STACKS=0)")
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
p=$(median "${plain[@]}") s=$(median "${stacks[@]}") n=$(median "${nostacks[@]}")
awk -v p="$p" -v s="$s" -v n="$n" -v runs="$runs" -v launches="$launches" -v libs="$libs" 'BEGIN {
  printf "launch_cost: %d runs x %d launches (30 frames deep), CUDA from %s, medians per launch\n", runs, launches, libs
  printf "  with a stack per launch:  %6d ns -> %6d ns  added %5d ns  ratio %.2f\n", p, s, s - p, s / p
  printf "  GPUMEM_LAUNCH_STACKS=0:   %6d ns -> %6d ns  added %5d ns  ratio %.2f\n", p, n, n - p, n / p
}'
