#!/usr/bin/env bash
# What the recorder's restarts of its event references (GPUMEM_RESYNC_EVENTS) cost in trace size,
# and what they save when the trace is damaged in its middle: samples/pytorch/train_transformer.py
# --amp --seconds SECONDS under `gpumem record --tensors`, once per setting of
# GPUMEM_RESYNC_EVENTS (SETTINGS, default "0 default": never, and the default), each trace measured
# by trace_size, then 40 bytes at its middle overwritten and read by `gpumem report`.
# Needs PyTorch and a GPU; PYTHON names the interpreter (a command, e.g. `env -u X python3`).
# Usage: tests/bench/run_resync_cost.sh [BUILD_DIR] [SECONDS] [OUT_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
seconds=${2:-60}
out=${3:-}
python=${PYTHON:-python3}
gpumem=$build/bin/gpumem
measure=$build/tests/bench/trace_size
for tool in "$gpumem" "$measure"; do
  [[ -x $tool ]] || { echo "run_resync_cost: $tool not built" >&2; exit 2; }
done
dir=$(mktemp -d "${TMPDIR:-/tmp}/gpumem-resync-XXXXXX")
trap 'rm -rf "$dir"' EXIT
for setting in ${SETTINGS:-0 default}; do
  trace=$dir/resync-$setting.trace
  resync=(GPUMEM_RESYNC_EVENTS="$setting")
  [[ $setting == default ]] && resync=(-u GPUMEM_RESYNC_EVENTS)
  env "${resync[@]}" "$gpumem" record --tensors --no-summary -o "$trace" -- \
    $python "$here/../../samples/pytorch/train_transformer.py" --amp --seconds "$seconds" >&2
  echo "GPUMEM_RESYNC_EVENTS=$setting:"
  "$measure" "$trace"
  # 40 bytes of 0x9b at the middle: a packet or two lost, and what the reader cannot resolve after.
  size=$(stat -c %s "$trace")
  head -c 40 /dev/zero | tr '\0' '\233' |
    dd of="$trace" bs=1 seek=$((size / 2)) conv=notrunc status=none
  report=$("$gpumem" report "$trace" 2>&1 || true)
  echo "  damaged at byte $((size / 2)): $(grep -o '[0-9]* event reference(s) to a template lost' <<<"$report" | head -1 || echo "no reference lost")"
  echo "  $(grep -m1 '^memory events:' <<<"$report" || echo "no memory event line")"
  if [[ -n $out ]]; then mkdir -p "$out" && cp "$trace" "$out/"; fi
done
