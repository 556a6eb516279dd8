#!/usr/bin/env bash
# How long `gpumem report` takes on a ~10 MB trace, unsymbolized (every report resolves the frames
# with the binaries) against symbolized (the frames are in the trace: no binary is read), and what
# `gpumem record` adds at the program's end: the symbolization, and the summary after it.
# The trace: deep_stacks (fake CUDA) under `gpumem record`, ALLOCATIONS allocations from STACKS
# distinct deep stacks. Medians of RUNS runs; max RSS from /usr/bin/time (GNU time).
# Usage: tests/bench/run_report_time.sh [BUILD_DIR] [RUNS] [ALLOCATIONS] [STACKS]
set -euo pipefail
build=${1:-build}
runs=${2:-5}
allocations=${3:-100000}
stacks=${4:-20000}
gpumem=$build/bin/gpumem
program=$build/tests/bench/deep_stacks
export LD_LIBRARY_PATH=$build/lib/fake
[[ -x /usr/bin/time ]] || { echo "run_report_time: needs GNU time (/usr/bin/time)" >&2; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# "SECONDS KB" of one run of the command (its output dropped).
measure() { /usr/bin/time -f '%e %M' -o "$dir/time" "$@" > /dev/null 2>&1; cat "$dir/time"; }
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
maximum() { printf '%s\n' "$@" | sort -n | tail -1; }
# Runs the command `runs` times; prints "median s, max RSS".
timed() {
  local seconds=() kb=()
  for ((i = 0; i < runs; i++)); do
    read -r s k < <(measure "$@")
    seconds+=("$s") kb+=("$k")
  done
  printf '%6.2f s  %6d KB' "$(median "${seconds[@]}")" "$(maximum "${kb[@]}")"
}

echo "deep_stacks $allocations $stacks, $runs runs each, medians and max RSS ($(nproc) cores)"
printf '  record, no symbolize, no summary:  %s\n' \
  "$(timed "$gpumem" record --no-symbolize --no-summary -o "$dir/plain.trace" -- "$program" \
     "$allocations" "$stacks")"
printf '  record, symbolize and summary:     %s\n' \
  "$(timed "$gpumem" record -o "$dir/recorded.trace" -- "$program" "$allocations" "$stacks")"
symbolize_runs=()
for ((i = 0; i < runs; i++)); do
  cp "$dir/plain.trace" "$dir/symbolized.trace"
  read -r s _ < <(measure "$gpumem" symbolize "$dir/symbolized.trace")
  symbolize_runs+=("$s")
done
printf '  symbolize alone (at-exit step):    %6.2f s\n' "$(median "${symbolize_runs[@]}")"
printf '  trace: %s bytes unsymbolized, %s symbolized\n' \
  "$(stat -c %s "$dir/plain.trace")" "$(stat -c %s "$dir/symbolized.trace")"
for trace in plain symbolized; do
  printf '  report %-11s (peak, leaks):  %s\n' "$trace" \
    "$(timed "$gpumem" report "$dir/$trace.trace")"
  printf '  report %-11s (all sections): %s\n' "$trace" \
    "$(timed "$gpumem" report --summary --peak --leaks --oom --growth --fragmentation --kernels \
       "$dir/$trace.trace")"
done
