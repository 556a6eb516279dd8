#!/usr/bin/env bash
# Step time of a PyTorch training script under gpumem against the same script without it (GPU only):
# samples/pytorch/train_mlp.py's steps (timed by tests/bench/step_time_timed.py) in the tensor-level
# mode (backend:cudaMallocAsync: every tensor is a driver allocation with a stack, every kernel launch has a stack, Python frames on), A/B
# interleaved: each round runs every arm once, in turn. Arms (GPUMEM_BENCH_ARMS, default all):
# plain (without gpumem); default (gpumem's default); pool_records (GPUMEM_CUPTI_POOLS=1: CUPTI
# memory-pool records on); no_cupti (GPUMEM_CUPTI=0); no_launch_stacks (GPUMEM_LAUNCH_STACKS=0);
# libunwind (GPUMEM_FAST_UNWIND=0: every stack through libunwind); and, to tell where the cost
# lies, disabled (GPUMEM_ENABLE=0: loaded, every hook a pass-through), no_stacks
# (GPUMEM_STACK_DEPTH=0 and no Python frames), no_launches (GPUMEM_LAUNCHES=0), no_python_frames
# (GPUMEM_PYTHON_FRAMES=0), no_observer (GPUMEM_PYTHON_HOLDERS=0). The recorded arms have
# gpumem's Python observer on PYTHONPATH, as `gpumem record` gives it. Every run is pinned to the
# same CPUs (GPUMEM_BENCH_CPUS, default 2-5, when taskset exists): where the process lands
# otherwise moves its step time more than what is measured. Each run reports four figures
# (step_time_timed.py): the mean step, the median of its 25-step windows (a burst of noise moves one
# window, not the figure), the main thread's CPU time per step and all threads' (the backward
# pass runs on PyTorch's autograd thread). Prints, per arm and figure, the median over rounds of (arm / plain of the same
# round): the ratio, robust to the machine drifting between rounds. The window median is the
# headline. Target: the default arm at most 1.05x. Results: tests/bench/RESULTS.md.
# STEP_TIME_ARGS: more arguments for step_time_timed.py, e.g. "--model transformer --amp" (whole
# processes, where run_recorders_side_by_side.sh toggles recording inside one).
# Usage: tests/bench/run_step_time.sh [BUILD_DIR] [ROUNDS] [STEPS] [OUT_DIR]
set -euo pipefail
build=${1:-build}
build=$(realpath -m "$build")  # absolute: a relative or absolute BUILD_DIR alike
rounds=${2:-7}
steps=${3:-300}
out=${4:-$(mktemp -d)}
python=${PYTHON:-python3}
script=tests/bench/step_time_timed.py
read -r -a script_args <<<"${STEP_TIME_ARGS:-}"
cuda_libs=${GPUMEM_BENCH_CUDA_LIBS:-}
source "$(dirname "$0")/pin.sh"
mkdir -p "$out"
trace=$out/step_time.trace
read -r -a arms <<<"${GPUMEM_BENCH_ARMS:-plain default pool_records no_cupti no_launch_stacks libunwind}"
[[ ${arms[0]} == plain ]] || { echo "run_step_time.sh: the first arm must be plain" >&2; exit 2; }
declare -A settings=(
  [default]=""
  [pool_records]="GPUMEM_CUPTI_POOLS=1"
  [no_cupti]="GPUMEM_CUPTI=0"
  [no_launch_stacks]="GPUMEM_LAUNCH_STACKS=0"
  [libunwind]="GPUMEM_FAST_UNWIND=0"
  [disabled]="GPUMEM_ENABLE=0"
  [no_stacks]="GPUMEM_STACK_DEPTH=0 GPUMEM_PYTHON_FRAMES=0"
  [no_launches]="GPUMEM_LAUNCHES=0"
  [no_python_frames]="GPUMEM_PYTHON_FRAMES=0"
  [no_observer]="GPUMEM_PYTHON_HOLDERS=0"
)
for arm in "${arms[@]:1}"; do
  [[ -v settings[$arm] ]] || { echo "run_step_time.sh: unknown arm '$arm'" >&2; exit 2; }
done
for arm in "${arms[@]}"; do : >"$out/step_$arm.txt"; done
step_ms() { tail -1; }  # the JSON line
for ((round = 0; round < rounds; round++)); do
  for arm in "${arms[@]}"; do
    if [[ $arm == plain ]]; then
      PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "${pin[@]}" $python "$script" "$steps" \
        ${script_args[@]+"${script_args[@]}"} | step_ms >>"$out/step_$arm.txt"
    else
      # shellcheck disable=SC2086  # settings are VAR=value words for env
      env PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync ${settings[$arm]} \
        ${cuda_libs:+LD_LIBRARY_PATH=$cuda_libs} LD_PRELOAD="$build/lib/libgpumem.so" \
        PYTHONPATH="$build/lib/python" GPUMEM_OUTPUT="$trace" "${pin[@]}" $python "$script" \
        "$steps" ${script_args[@]+"${script_args[@]}"} | step_ms >>"$out/step_$arm.txt"
    fi
  done
done
rm -f "$trace"
$python - "$out" "$rounds" "$steps" "${pin[*]:-unpinned}" "${script_args[*]:-}" "${arms[@]}" <<'PY'
import json, statistics, sys
out, rounds, steps, pin, script_args, arms = (sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4],
                                              sys.argv[5], sys.argv[6:])
runs = {arm: [json.loads(line) for line in open(f"{out}/step_{arm}.txt")] for arm in arms}
figures = (("step_ms_median_window", "window median"), ("step_ms", "mean step"),
           ("step_cpu_ms", "main-thread CPU"), ("step_process_cpu_ms", "process CPU"))
print(f"step_time: step_time_timed.py {script_args or '(train_mlp.py)'}, backend:cudaMallocAsync, {steps} steps, {rounds} interleaved rounds, "
      f"{pin}; ratio = median over rounds of arm / without gpumem")
names = {"plain": "without gpumem", "default": "gpumem default (all stacks)",
         "pool_records": "GPUMEM_CUPTI_POOLS=1", "no_cupti": "GPUMEM_CUPTI=0",
         "no_launch_stacks": "GPUMEM_LAUNCH_STACKS=0", "libunwind": "GPUMEM_FAST_UNWIND=0",
         "disabled": "GPUMEM_ENABLE=0", "no_stacks": "no stacks at all",
         "no_launches": "GPUMEM_LAUNCHES=0", "no_python_frames": "GPUMEM_PYTHON_FRAMES=0",
         "no_observer": "GPUMEM_PYTHON_HOLDERS=0"}
for arm in arms:
    parts = []
    for key, label in figures:
        if any(key not in run for run in runs[arm] + runs["plain"]):
            continue
        values = [run[key] for run in runs[arm]]
        plain = [run[key] for run in runs["plain"]]
        text = f"{label} {statistics.median(values):.3f} ms"
        if arm != "plain":
            ratios = [v / p for v, p in zip(values, plain)]
            text += f" ratio {statistics.median(ratios):.3f}"
        parts.append(text)
    print(f"  {names.get(arm, arm):<30} " + "; ".join(parts))
for arm in arms[1:]:
    ratios = [a.get("step_ms_median_window", a["step_ms"]) / p.get("step_ms_median_window", p["step_ms"])
              for a, p in zip(runs[arm], runs["plain"])]
    print(f"  per round, window median, {names.get(arm, arm)}: " + " ".join(f"{r:.3f}" for r in ratios))
PY
