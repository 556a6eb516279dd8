#!/usr/bin/env bash
# Where a PyTorch training step's time goes with gpumem recording, on machines without perf (GPU
# only): samples/pytorch/train_mlp.py's steps (tests/bench/step_time_timed.py) under pc_sampler
# (tests/bench/pc_sampler.cc: each working thread's program counter every 100 µs, during the steps only), once without gpumem and once with it, then
# pc_profile.py's summary of each: libraries' shares, the top functions, gpumem's top source lines.
# The sample files stay in OUT_DIR (pc.plain.PID, pc.gpumem.PID) to be summarised again elsewhere
# against the build's libgpumem.so.
# Usage: tests/bench/run_pc_profile.sh [BUILD_DIR] [STEPS] [OUT_DIR]
set -euo pipefail
build=${1:-build}
build=$(realpath -m "$build")  # absolute: a relative or absolute BUILD_DIR alike
steps=${2:-1000}
out=${3:-$(mktemp -d)}
python=${PYTHON:-python3}
source "$(dirname "$0")/pin.sh"
mkdir -p "$out"
rm -f "$out"/pc.plain.* "$out"/pc.gpumem.*
sampler="$build/tests/bench/libpc_sampler.so"
export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
export PC_SAMPLER_GATED=1
PC_SAMPLER_OUTPUT="$out/pc.plain" LD_PRELOAD="$sampler" "${pin[@]}" \
  $python tests/bench/step_time_timed.py "$steps" | tail -1
PC_SAMPLER_OUTPUT="$out/pc.gpumem" LD_PRELOAD="$build/lib/libgpumem.so $sampler" \
  PYTHONPATH="$build/lib/python" GPUMEM_OUTPUT="$out/pc.trace" "${pin[@]}" \
  $python tests/bench/step_time_timed.py "$steps" | tail -1
rm -f "$out/pc.trace"
echo "== without gpumem"
$python "$(dirname "$0")/pc_profile.py" --lib "$build/lib/libgpumem.so" --top 12 "$out"/pc.plain.*
echo "== with gpumem"
$python "$(dirname "$0")/pc_profile.py" --lib "$build/lib/libgpumem.so" --top 30 "$out"/pc.gpumem.*
