#!/usr/bin/env bash
# `gpumem report DIR` on many rank traces against the machine's own ceiling: RANKS (default 64)
# traces of a quarter of RANK_EVENTS (default 2,000,000) to all of it, recorded by the analyzer benchmark's training loop (one process each,
# JOBS at once), then ROUNDS (default 3) interleaved rounds of `gpumem report --jobs JOBS DIR`, the
# same with OTHER_GPUMEM (another build's binary, to compare; optional), and the control: JOBS
# independent `gpumem report TRACE` processes at once, largest first. Then --jobs 8 and 1, the
# largest trace alone, and the combined view's merge alone on 1 and JOBS threads (combined_merge).
# Times by `date`, one line each; the two binaries' outputs are compared.
# Traces go under $TMPDIR (default /tmp, about 1 GB) and are deleted.
# Usage: tests/bench/run_report_dir.sh BUILD_DIR [OTHER_GPUMEM]
#   (set GPUMEM_LIBUNWIND to record the traces with stacks, as a real job's are)
set -euo pipefail
build=${1:?usage: run_report_dir.sh BUILD_DIR [OTHER_GPUMEM]}
other=${2:-}
ranks=${RANKS:-64}
rounds=${ROUNDS:-3}
jobs=${JOBS:-$(nproc)}
largest=${RANK_EVENTS:-2000000}
gpumem=$build/bin/gpumem
dir=$(mktemp -d "${TMPDIR:-/tmp}/gpumem-ranks.XXXXXX")
trap 'rm -rf "$dir"' EXIT
for ((i = 0; i < ranks; i++)); do echo $((largest / 4 + i * (largest * 3 / 4) / ranks)); done |
  xargs -P "$jobs" -I{} sh -c "'$build/tests/bench/analyzer_throughput' {} --generate '$dir/rank-{}.trace' > /dev/null"
echo "$ranks traces, $(du -sh "$dir" | cut -f1), $jobs jobs, $(nproc) cores"
timed() {
  local start end
  start=$(date +%s.%N)
  "$@" > /dev/null 2>&1
  end=$(date +%s.%N)
  echo "$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.2f", b - a}') s: $*"
}
if [[ -n $other ]]; then
  "$gpumem" report --jobs "$jobs" "$dir" > "$dir.this.txt" 2>&1 || true
  "$other" report --jobs "$jobs" "$dir" > "$dir.other.txt" 2>&1 || true
  cmp -s "$dir.this.txt" "$dir.other.txt" && echo "outputs identical" || echo "outputs differ"
  rm -f "$dir.this.txt" "$dir.other.txt"
fi
for ((round = 1; round <= rounds; round++)); do
  timed "$gpumem" report --jobs "$jobs" "$dir"
  [[ -z $other ]] || timed "$other" report --jobs "$jobs" "$dir"
  timed sh -c "ls -S '$dir'/*.trace | xargs -P $jobs -n 1 '$gpumem' report"
done
timed "$gpumem" report --jobs 8 "$dir"
timed "$gpumem" report --jobs 1 "$dir"
timed "$gpumem" report "$(ls -S "$dir"/*.trace | head -1)"
"$build/tests/bench/combined_merge" --traces "$dir" "$jobs" | tail -2
