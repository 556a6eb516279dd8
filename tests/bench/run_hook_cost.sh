#!/usr/bin/env bash
# What gpumem itself adds per allocation (30 frames deep, stack included) and per free, without
# any driver: hook_cost against stub_cudart, with and without gpumem, A/B interleaved, medians.
# Usage: tests/bench/run_hook_cost.sh [BUILD_DIR] [RUNS] [CALLS]
set -euo pipefail
build=${1:-build}
runs=${2:-7}
calls=${3:-200000}
bench=$build/tests/bench
trace_dir=$(mktemp -d)
trap 'rm -rf "$trace_dir"' EXIT
plain=() traced=()
for ((i = 0; i < runs; i++)); do
  plain+=("$(LD_LIBRARY_PATH=$bench/stub "$bench/hook_cost" "$calls")")
  traced+=("$(LD_LIBRARY_PATH=$bench/stub LD_PRELOAD=$build/lib/libgpumem.so \
              GPUMEM_OUTPUT=$trace_dir/hook.trace "$bench/hook_cost" "$calls")")
done
median() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
pa=$(printf '%s\n' "${plain[@]}" | median alloc_ns) pf=$(printf '%s\n' "${plain[@]}" | median free_ns)
ta=$(printf '%s\n' "${traced[@]}" | median alloc_ns) tf=$(printf '%s\n' "${traced[@]}" | median free_ns)
awk -v pa="$pa" -v pf="$pf" -v ta="$ta" -v tf="$tf" -v runs="$runs" -v calls="$calls" 'BEGIN {
  printf "hook_cost: %d runs x %d calls against a do-nothing libcudart, medians\n", runs, calls
  printf "  per allocation, 30 frames deep: %7.1f ns -> %7.1f ns  added %6.1f ns  (target: <= 1000 ns)\n", pa, ta, ta - pa
  printf "  per free:                       %7.1f ns -> %7.1f ns  added %6.1f ns  (target: <= 150 ns)\n", pf, tf, tf - pf
}'
