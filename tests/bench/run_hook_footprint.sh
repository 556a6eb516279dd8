#!/usr/bin/env bash
# The cache lines a launch hook touches, counted rather than timed: launch_cost (a launch 30
# frames deep, LAUNCH_COST_EVICT_KB of memory written between launches, as a framework's own work
# evicts gpumem's data) under valgrind's cachegrind, without gpumem and with it, each given
# library in turn. Cachegrind simulates the caches, so the counts are the same from run to run
# (with address randomization off) on any machine: a change to the hooks' memory layout shows here to the line, where timings on a
# shared machine move by more than it (inside a framework each line is a miss, which is what the
# hooks' time mostly is: tests/bench/RESULTS.md, "Where the time goes"). Prints per launch the
# instructions and the first-level data-cache read and write misses, whole program and gpumem's
# share, then the functions with the most misses. Uses the fake CUDA. LAUNCH_COST_KERNEL=wide
# launches a kernel whose arguments are one 512-byte struct holding three device pointers, as
# PyTorch's elementwise kernels take theirs (the default: two scalar arguments).
# Usage: tests/bench/run_hook_footprint.sh [BUILD_DIR] [LAUNCHES] [LIBRARY...]
#   (LIBRARY: other builds of libgpumem.so to count as well; default BUILD_DIR's own)
set -euo pipefail
build=${1:-build}
launches=${2:-2000}
shift $(($# > 2 ? 2 : $#))
libraries=("$@")
((${#libraries[@]})) || libraries=("$build/lib/libgpumem.so")
command -v valgrind >/dev/null && command -v cg_annotate >/dev/null ||
  { echo "run_hook_footprint: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
program=$build/tests/bench/launch_cost
[[ -x $program ]] || { echo "run_hook_footprint: $program not built" >&2; exit 2; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/gpumem-footprint.XXXXXX")
trap 'rm -rf "$dir"' EXIT
evict_kb=${LAUNCH_COST_EVICT_KB:-4096}
# A first-level data cache of 48 KiB and a 2 MiB last level, as on the GPU hosts' Xeons; the
# eviction writes more than both between launches.
caches=(--I1=32768,8,64 --D1=49152,12,64 --LL=2097152,16,64)

# Address randomization off where setarch can, so that the same layout gives the same counts
# (with it, which lines share a cache set moves the counts by a line or two from run to run).
fixed_layout=()
setarch "$(uname -m)" -R true 2>/dev/null && fixed_layout=(setarch "$(uname -m)" -R)

# Runs launch_cost under cachegrind into $dir/$1.out, with the environment that follows.
count() {
  local name=$1
  shift
  env LD_LIBRARY_PATH="$build/lib/fake" LAUNCH_COST_EVICT_KB="$evict_kb" "$@" "${fixed_layout[@]}" \
    valgrind --tool=cachegrind --cache-sim=yes "${caches[@]}" \
    --cachegrind-out-file="$dir/$name.out" "$program" "$launches" >/dev/null 2>&1
}

# Per launch, for the functions whose name matches $2 (all but the benchmark's own loop, which
# does the evicting): instructions, read misses, write misses. Set-up is spread over the
# launches: count a few thousand.
per_launch() {
  cg_annotate --show=Ir,D1mr,D1mw --threshold=0 "$dir/$1.out" 2>/dev/null | sed 's/([^)]*)//g' |
    awk -v n="$launches" -v only="$2" '
      /file:function/ { table = 1; next }
      table && /^ *[0-9]/ && !/MeasureAtDepth/ && $0 ~ only {
        for (k = 1; k <= 3; k++) { v = $k; gsub(",", "", v); sum[k] += v }
      }
      END { printf "%7.0f instructions %6.1f read misses %6.1f write misses", sum[1] / n, sum[2] / n, sum[3] / n }'
}

# The functions of gpumem (its sources' folders) with the most misses per launch.
top_functions() {
  cg_annotate --show=D1mr,D1mw --threshold=0 "$dir/$1.out" 2>/dev/null | sed 's/([^)]*)//g' |
    awk -v n="$launches" '
      /file:function/ { table = 1; next }
      table && /^ *[0-9]/ && /(core|interpose|cupti)\// {
        r = $1; w = $2; gsub(",", "", r); gsub(",", "", w)
        name = $3; sub(/^.*:gpumem::/, "", name); sub(/\(.*/, "", name)
        misses[name] += (r + w) / n
      }
      END { for (f in misses) if (misses[f] >= 0.5) printf "%6.1f  %s\n", misses[f], f }' |
    sort -rn | head -8
}

count plain
echo "hook footprint: $launches launches of the ${LAUNCH_COST_KERNEL:-noop} kernel 30 frames deep," \
  "${evict_kb} KiB written between them;" \
  "cachegrind, D1 48 KiB, LL 2 MiB; per launch"
echo "  without gpumem:   $(per_launch plain .)"
for i in "${!libraries[@]}"; do
  count "with$i" LD_PRELOAD="$(realpath "${libraries[$i]}")" GPUMEM_OUTPUT="$dir/run$i.trace"
  echo "${libraries[$i]}:"
  echo "  whole program:    $(per_launch "with$i" .)"
  echo "  in gpumem's code: $(per_launch "with$i" '(core|interpose|cupti)/')"
  top_functions "with$i" | sed 's/^/    /'
done
