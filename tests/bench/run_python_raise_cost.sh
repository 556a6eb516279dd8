#!/usr/bin/env bash
# What gpumem's Python observer adds to each exception a program raises once torch is imported
# (CPython 3.12+: a sys.monitoring RAISE callback that fires in every frame an exception passes
# through and cannot be switched off there). The same raise-and-catch loop
# (python_raise_cost.py), raised 1 and 10 frames below its `try`: without gpumem, under gpumem
# with the observer's PyTorch hooks off (GPUMEM_PYTHON_TORCH=0) and on; A/B interleaved, medians.
# The torch imported is the fake one (tests/integration/programs/fake_torch) unless TORCH_PATH
# names another directory ("" for the installed PyTorch). PYTHON picks the interpreter (default
# python3; before 3.12 the observer watches no raise and both arms should match).
# Usage: tests/bench/run_python_raise_cost.sh [BUILD_DIR] [RUNS] [ITERATIONS]
set -euo pipefail
build=$(realpath "${1:-build}")
runs=${2:-7}
iterations=${3:-200000}
python=${PYTHON:-python3}
torch_path=${TORCH_PATH-$(dirname "$0")/../integration/programs/fake_torch}
script=$(dirname "$0")/python_raise_cost.py
source "$(dirname "$0")/pin.sh"
trace_dir=$(mktemp -d)
trap 'rm -rf "$trace_dir"' EXIT

measure() {  # DEPTH, then extra environment
  local depth=$1
  shift
  env LD_LIBRARY_PATH="$build/lib/fake" PYTHONPATH="$build/lib/python${torch_path:+:$torch_path}" \
    "$@" "${pin[@]}" "$python" "$script" "$iterations" "$depth" | sed 's/ns_per_raise=//'
}
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
version=$("$python" -c 'import platform; print(platform.python_version())')
echo "python_raise_cost (Python $version): $runs runs x $iterations raises, ${pin[*]:-unpinned}, medians"
for depth in 1 10; do
  base=() off=() on=() added=()
  for ((i = 0; i < runs; i++)); do
    base+=("$(measure "$depth" GPUMEM_UNUSED=1)")
    off+=("$(measure "$depth" LD_PRELOAD="$build/lib/libgpumem.so" GPUMEM_OUTPUT="$trace_dir/off.trace" GPUMEM_PYTHON_TORCH=0)")
    on+=("$(measure "$depth" LD_PRELOAD="$build/lib/libgpumem.so" GPUMEM_OUTPUT="$trace_dir/on.trace")")
    added+=($((on[i] - off[i])))
  done
  printf '  raised %2d frame(s) below the try: %5d ns without gpumem, %5d ns observer off, %5d ns on: %+d ns per raise (median of each round'"'"'s on - off)\n' \
    "$depth" "$(median "${base[@]}")" "$(median "${off[@]}")" "$(median "${on[@]}")" "$(median "${added[@]}")"
done
