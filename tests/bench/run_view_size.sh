#!/usr/bin/env bash
# gpumem view on long traces: for traces of 1 M and 10 M memory events recorded by gpumem's own
# recorder (analyzer_throughput --generate: two threads, ~10,000 live buffers, 300 call stacks),
# the time `gpumem view` takes to write the page, its peak RSS, the page's size, and (with
# Chromium) the time from opening the page to its charts drawn. Targets: under 20 MB and usable
# within 2 s for 10 M events. A benchmark, not a CI test; traces go under $TMPDIR (default /tmp,
# about 45 bytes an event) and are deleted afterwards.
# Usage: tests/bench/run_view_size.sh [BUILD_DIR] [EVENTS...]   (default: 1000000 10000000)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
shift $(($# > 0 ? 1 : 0))
sizes=("$@")
((${#sizes[@]})) || sizes=(1000000 10000000)
gpumem=$build/bin/gpumem
generator=$build/tests/bench/analyzer_throughput
for tool in "$gpumem" "$generator"; do
  [[ -x $tool ]] || { echo "run_view_size: $tool not built (cmake --build $build --target gpumem analyzer_throughput)" >&2; exit 2; }
done
dir=$(mktemp -d "${TMPDIR:-/tmp}/gpumem-view-bench-XXXXXX")
trap 'rm -rf "$dir"' EXIT
printf '%-12s %-12s %-14s %-14s %-12s %s\n' events trace view_seconds view_peak_rss page_size load_to_drawn
for events in "${sizes[@]}"; do
  trace=$dir/bench-$events.trace
  "$generator" "$events" --generate "$trace" >/dev/null
  trace_mb=$(awk -v b="$(stat -c %s "$trace")" 'BEGIN { printf "%.1f MB", b / 1e6 }')
  page=$dir/bench-$events.html
  /usr/bin/time -f '%e %M' -o "$dir/time" "$gpumem" view "$trace" -o "$page" 2>/dev/null
  read -r seconds rss_kb <"$dir/time"
  page_mb=$(awk -v b="$(stat -c %s "$page")" 'BEGIN { printf "%.2f MB", b / 1e6 }')
  load=$(python3 "$here/view_load_time.py" "$page" 3 || true)
  printf '%-12s %-12s %-14s %-14s %-12s %s\n' "$events" "$trace_mb" "${seconds} s" \
    "$((rss_kb / 1024)) MiB" "$page_mb" "$load"
  rm -f "$trace" "$page"
done
