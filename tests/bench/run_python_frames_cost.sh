#!/usr/bin/env bash
# Added cost of reading Python frames per allocation: the same ctypes-driven cudaMalloc/cudaFree
# loop from a 20-frame Python stack, under gpumem with GPUMEM_PYTHON_FRAMES=1 and =0, A/B
# interleaved, medians. Only the allocation takes a stack (GPUMEM_FREE_STACKS=0), so the difference
# per pair is the cost per event that takes a stack. Also prints the loop without gpumem.
# Uses the fake CUDA unless GPUMEM_BENCH_CUDA_LIBS names a directory holding the real
# libcudart.so.13. PYTHON picks the interpreter (default python3).
# Usage: tests/bench/run_python_frames_cost.sh [BUILD_DIR] [RUNS] [ITERATIONS] [DEPTH]
set -euo pipefail
build=${1:-build}
runs=${2:-7}
iterations=${3:-200000}
depth=${4:-20}
python=${PYTHON:-python3}
libs=${GPUMEM_BENCH_CUDA_LIBS:-$build/lib/fake}
script=$(dirname "$0")/python_frames_cost.py
source "$(dirname "$0")/pin.sh"
trace_dir=$(mktemp -d)
trap 'rm -rf "$trace_dir"' EXIT

measure() {  # extra environment as arguments
  env LD_LIBRARY_PATH="$libs" "$@" "${pin[@]}" "$python" "$script" "$iterations" "$depth" libcudart.so.13 |
    sed 's/ns_per_pair=//'
}
base=() off=() on=()
for ((i = 0; i < runs; i++)); do
  base+=("$(measure GPUMEM_UNUSED=1)")
  off+=("$(measure LD_PRELOAD="$build/lib/libgpumem.so" GPUMEM_OUTPUT="$trace_dir/off.trace" GPUMEM_PYTHON_FRAMES=0)")
  on+=("$(measure LD_PRELOAD="$build/lib/libgpumem.so" GPUMEM_OUTPUT="$trace_dir/on.trace" GPUMEM_PYTHON_FRAMES=1)")
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
b=$(median "${base[@]}") f=$(median "${off[@]}") n=$(median "${on[@]}")
# The added cost from each round's own pair of runs, then the median: drift between rounds cancels.
added=()
for ((i = 0; i < runs; i++)); do added+=($((on[i] - off[i]))); done
a=$(median "${added[@]}")
version=$("$python" -c 'import platform; print(platform.python_version())')
awk -v b="$b" -v f="$f" -v n="$n" -v runs="$runs" -v it="$iterations" -v depth="$depth" \
    -v libs="$libs" -v version="$version" -v a="$a" -v pinned="${pin[*]:-unpinned}" 'BEGIN {
  printf "python_frames_cost (Python %s, %d frames deep): %d runs x %d alloc+free pairs, CUDA from %s, %s, medians\n", version, depth, runs, it, libs, pinned
  printf "  per pair without gpumem:            %6d ns\n", b
  printf "  per pair, gpumem, Python frames off: %6d ns\n", f
  printf "  per pair, gpumem, Python frames on:  %6d ns\n", n
  printf "  added by Python frames per event:    %6d ns  (target: <= 200 ns; median of each round'"'"'s on - off)\n", a
}'
