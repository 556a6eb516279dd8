#!/usr/bin/env bash
# Step time of a PyTorch training script under gpumem against the same script without it (GPU only):
# samples/pytorch/train_mlp.py in the tensor-level mode (backend:cudaMallocAsync: every tensor is a
# driver allocation with a stack, every kernel launch has a stack, Python frames on), A/B
# interleaved: each round runs every arm once, in turn. Arms: without gpumem; gpumem's default;
# GPUMEM_CUPTI_POOLS=0 (no CUPTI memory-pool records); GPUMEM_CUPTI=0 (no CUPTI at all);
# GPUMEM_LAUNCH_STACKS=0. Prints, per arm, the median step time and the median over rounds of
# (arm / plain of the same round): the ratio, robust to the machine drifting between rounds.
# Target (issue 4): the default arm at most 1.05x.
# Usage: tests/bench/run_step_time.sh [BUILD_DIR] [ROUNDS] [STEPS] [OUT_DIR]
set -euo pipefail
build=${1:-build}
rounds=${2:-7}
steps=${3:-300}
out=${4:-$(mktemp -d)}
python=${PYTHON:-python3}
script=samples/pytorch/train_mlp.py
cuda_libs=${GPUMEM_BENCH_CUDA_LIBS:-}
mkdir -p "$out"
trace=$out/step_time.trace
arms=(plain default no_pool_records no_cupti no_launch_stacks)
declare -A settings=(
  [default]=""
  [no_pool_records]="GPUMEM_CUPTI_POOLS=0"
  [no_cupti]="GPUMEM_CUPTI=0"
  [no_launch_stacks]="GPUMEM_LAUNCH_STACKS=0"
)
for arm in "${arms[@]}"; do : >"$out/step_$arm.txt"; done
step_ms() { tail -1 | $python -c 'import json, sys; print(json.loads(sys.stdin.read())["step_ms"])'; }
for ((round = 0; round < rounds; round++)); do
  for arm in "${arms[@]}"; do
    if [[ $arm == plain ]]; then
      PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync $python "$script" "$steps" | step_ms >>"$out/step_$arm.txt"
    else
      # shellcheck disable=SC2086  # settings are VAR=value words for env
      env PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync ${settings[$arm]} \
        ${cuda_libs:+LD_LIBRARY_PATH=$cuda_libs} LD_PRELOAD="$PWD/$build/lib/libgpumem.so" \
        GPUMEM_OUTPUT="$trace" $python "$script" "$steps" | step_ms >>"$out/step_$arm.txt"
    fi
  done
done
rm -f "$trace"
$python - "$out" "$rounds" "$steps" "${arms[@]}" <<'PY'
import statistics, sys
out, rounds, steps, arms = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
times = {arm: [float(line) for line in open(f"{out}/step_{arm}.txt")] for arm in arms}
plain = times["plain"]
print(f"step_time: train_mlp.py, backend:cudaMallocAsync, {steps} steps, {rounds} interleaved rounds")
print(f"  {'without gpumem':<34} {statistics.median(plain):7.3f} ms")
names = {"default": "gpumem default (all stacks)", "no_pool_records": "GPUMEM_CUPTI_POOLS=0",
         "no_cupti": "GPUMEM_CUPTI=0", "no_launch_stacks": "GPUMEM_LAUNCH_STACKS=0"}
for arm in arms[1:]:
    ratios = [t / p for t, p in zip(times[arm], plain)]
    print(f"  {names[arm]:<34} {statistics.median(times[arm]):7.3f} ms  ratio {statistics.median(ratios):.3f}"
          f"  (per round: {' '.join(f'{r:.3f}' for r in ratios)})")
PY
