#!/usr/bin/env bash
# Added cost of recording per allocation (with its 30-frame stack) and per free: alloc_cost run
# with and without gpumem, A/B interleaved, median over the runs. Uses the fake CUDA unless
# GPUMEM_BENCH_CUDA_LIBS names a directory holding the real libcudart.so.13 (a GPU machine).
# Usage: tests/bench/run_alloc_cost.sh [BUILD_DIR] [RUNS] [PAIRS] [sync|async]
# GPUMEM_BENCH_STACK_DEPTH sets GPUMEM_STACK_DEPTH for the recorded runs (default 64; 0: no stacks).
set -euo pipefail
build=${1:-build}
runs=${2:-7}
pairs=${3:-20000}
mode=${4:-sync}
libs=${GPUMEM_BENCH_CUDA_LIBS:-$build/lib/fake}
trace_dir=$(mktemp -d)
trap 'rm -rf "$trace_dir"' EXIT

base_alloc=() base_free=() with_alloc=() with_free=()
for ((i = 0; i < runs; i++)); do
  read -r a f < <(LD_LIBRARY_PATH=$libs "$build/tests/bench/alloc_cost" "$pairs" "$mode" |
                  sed 's/alloc_ns=\([0-9]*\) free_ns=\([0-9]*\)/\1 \2/')
  base_alloc+=("$a") base_free+=("$f")
  read -r a f < <(LD_LIBRARY_PATH=$libs LD_PRELOAD=$build/lib/libgpumem.so GPUMEM_STACK_DEPTH=${GPUMEM_BENCH_STACK_DEPTH:-64} \
                  GPUMEM_OUTPUT=$trace_dir/bench.trace "$build/tests/bench/alloc_cost" "$pairs" "$mode" |
                  sed 's/alloc_ns=\([0-9]*\) free_ns=\([0-9]*\)/\1 \2/')
  with_alloc+=("$a") with_free+=("$f")
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
ba=$(median "${base_alloc[@]}") bf=$(median "${base_free[@]}")
wa=$(median "${with_alloc[@]}") wf=$(median "${with_free[@]}")
awk -v ba="$ba" -v wa="$wa" -v bf="$bf" -v wf="$wf" -v runs="$runs" -v pairs="$pairs" -v libs="$libs" -v mode="$mode" -v depth="${GPUMEM_BENCH_STACK_DEPTH:-64}" 'BEGIN {
  printf "alloc_cost (%s, stack depth %s): %d runs x %d pairs, CUDA from %s, medians\n", mode, depth, runs, pairs, libs
  printf "  per allocation, 30 frames deep:  %6d ns -> %6d ns  added %5d ns  ratio %.2f  (target: added <= 1000 ns)\n", ba, wa, wa - ba, wa / ba
  printf "  per free:                        %6d ns -> %6d ns  added %5d ns  ratio %.2f  (target: added <= 150 ns)\n", bf, wf, wf - bf, wf / bf
}'
