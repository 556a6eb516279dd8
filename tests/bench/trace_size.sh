#!/usr/bin/env bash
# Trace size: the bytes a trace spends on each memory or launch event, over the whole file and over
# its second half alone (the steady state a longer run converges to). Target: at most 16 bytes an
# event over a 10-minute `--tensors` PyTorch run.
# Usage:
#   tests/bench/trace_size.sh [BUILD_DIR] [SECONDS]   records samples/pytorch/train_transformer.py
#       --amp --seconds SECONDS (default 60) with `gpumem record --tensors` (PyTorch and a GPU),
#       then measures its trace(s); PYTHON names the interpreter (a command, e.g. `env -u X python3`)
#   tests/bench/trace_size.sh [BUILD_DIR] TRACE...    measures traces recorded elsewhere
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
shift $(($# > 0 ? 1 : 0))
measure=$build/tests/bench/trace_size
gpumem=$build/bin/gpumem
[[ -x $measure ]] || { echo "trace_size: $measure not built (cmake --build $build --target trace_size)" >&2; exit 2; }
if (($# > 0)) && [[ ! $1 =~ ^[0-9]+$ ]]; then
  exec "$measure" "$@"
fi
seconds=${1:-60}
python=${PYTHON:-python3}
[[ -x $gpumem ]] || { echo "trace_size: $gpumem not built" >&2; exit 2; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/gpumem-trace-size-XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$gpumem" record --tensors --no-summary -o "$dir/run.trace" -- \
  $python "$here/../../samples/pytorch/train_transformer.py" --amp --seconds "$seconds" >&2
"$measure" "$dir"/*.trace
