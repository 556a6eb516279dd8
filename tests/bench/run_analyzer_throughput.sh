#!/usr/bin/env bash
# Analyzer throughput: ReplayTrace() (one thread) over a trace of EVENTS memory events (default
# 50,000,000) recorded by gpumem's own recorder, and over one of EVENTS/10, with the peak RSS of
# each replay: the target is >= 10 M events/s, and the same RSS for both lengths. Also times the
# commands users run on the same traces: `gpumem report` and `gpumem report --summary` (events/s and
# peak RSS: the same at both lengths). Then RANKS (default 64) traces of varied lengths, the largest
# RANK_EVENTS (default 2,000,000), in one directory: `gpumem report DIR` (the traces analysed in
# parallel, one per core) against `gpumem report` of the largest alone, and against the control:
# one `gpumem report TRACE` process per trace, as many at once as cores (the machine's own
# ceiling: memory bandwidth, hyperthreads, turbo). RANKS=0 skips it.
# The traces go under $TMPDIR (default /tmp; about 45 bytes an event, 2.2 GB for 50M events) and
# are deleted after their runs; the benchmark refuses when there is not room for them.
# Usage: tests/bench/run_analyzer_throughput.sh [BUILD_DIR] [EVENTS] [-- MORE ARGS]
#   e.g. ... build 50000000 -- --compare   (also times the old in-memory path on EVENTS/10)
set -euo pipefail
build=${1:-build}
events=${2:-50000000}
shift $(($# < 2 ? $# : 2))
[[ ${1:-} == -- ]] && shift
gpumem=()
if [[ -x $build/bin/gpumem ]]; then
  gpumem=(--gpumem "$build/bin/gpumem")
  if [[ ${RANKS:-64} != 0 ]]; then
    gpumem+=(--ranks "${RANKS:-64}" --rank-events "${RANK_EVENTS:-2000000}")
  fi
fi
exec "$build/tests/bench/analyzer_throughput" "$events" "${gpumem[@]}" "$@"
