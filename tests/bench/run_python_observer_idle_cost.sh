#!/usr/bin/env bash
# What gpumem's Python observer costs Python code once it has settled: python_observer_idle_cost.py
# under libgpumem.so with the observer, ROUNDS times (each its own process). Needs CPython 3.12+
# and PyTorch (PYTHON picks the interpreter, default python3).
# Usage: tests/bench/run_python_observer_idle_cost.sh [BUILD_DIR] [ROUNDS] [WINDOWS]
set -euo pipefail
build=$(realpath "${1:-build}")
rounds=${2:-2}
windows=${3:-40}
python=${PYTHON:-python3}
script=$(dirname "$0")/python_observer_idle_cost.py
source "$(dirname "$0")/pin.sh"
trace_dir=$(mktemp -d)
trap 'rm -rf "$trace_dir"' EXIT
echo "python_observer_idle_cost ($("$python" --version 2>&1)): $rounds rounds of $windows windows, ${pin[*]:-unpinned}"
for ((round = 1; round <= rounds; round++)); do
  env GPUMEM_OUTPUT="$trace_dir/observer.trace" LD_PRELOAD="$build/lib/libgpumem.so" \
    GPUMEM_LIBUNWIND="${GPUMEM_LIBUNWIND:-$build/lib/libunwind.so.8}" \
    PYTHONPATH="$build/lib/python" "${pin[@]}" "$python" "$script" "$windows"
  rm -f "$trace_dir"/*.trace
done
