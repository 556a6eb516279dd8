#!/usr/bin/env bash
# gpumem against PyTorch's own memory recorder, side by side in one process (GPU only): under the
# benchmarks' build, libgpumem_bench.so, tests/bench/step_time_timed.py --recorders times windows
# of training steps in four conditions, A nothing (gpumem paused), B gpumem recording, C
# torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="all") with gpumem
# paused, D the same with stacks="python", in the balanced orders of a Williams design (ABDC BCAD
# CDBA DACB), each block's windows over its own A window. For each model, samples/pytorch/
# train_mlp.py (windows of 25 steps) and train_transformer.py --amp (bfloat16 autocast, windows of
# 10 steps), in each allocator mode: default (PyTorch's caching allocator), expandable
# (expandable_segments:True) and tensors (the environment `gpumem record --tensors` gives the
# program: backend:cudaMallocAsync and GPUMEM_TENSORS, so that A is the async backend unrecorded;
# PyTorch's recorder raises there, and C and D are reported as not available). PROCESSES processes
# per model and mode, each measuring for SECONDS, plus AA_PROCESSES (default 1; 0: none) A/A
# control processes (GPUMEM_BENCH_TOGGLE_AA=1: B paused too), interleaved so that a drift of the
# machine reaches every row alike, all pinned to the same CPUs (pin.sh).
# Prints (tests/bench/toggle_summary.py) a Markdown table for tests/bench/RESULTS.md, a row per
# model and mode: B/A, C/A, D/A and gpumem's added cost as a fraction of stacks="all"'s,
# (B-1)/(C-1), with 95 % intervals from a bootstrap over processes, the A/A control, and the
# targets, met or not. OUT_DIR keeps each process's line (MODEL.MODE.recorders.txt and
# .recorders_aa.txt), to print again or pool with other runs.
# Time: the defaults (3 processes x 8 s, 2 models x 3 modes, one A/A control each: 24 processes)
# take about 8 minutes on an H100 with ~10 s to start each; MODES=default is a quick run (~2.5
# minutes), MODELS=mlp halves it again.
# Usage: tests/bench/run_recorders_side_by_side.sh [BUILD_DIR] [PROCESSES] [SECONDS] [OUT_DIR]
# MODELS (default "mlp transformer-amp"), MODES (default "default expandable tensors"),
# AA_PROCESSES; GPUMEM_BENCH_DRY_RUN=1 runs step_time_timed.py --dry-run without gpumem (no GPU, no
# torch: to try this script and the summary).
set -uo pipefail  # not -e: a process that fails is counted and the others go on
build=${1:-build}
build=$(realpath -m "$build")  # absolute: a relative or absolute BUILD_DIR alike
processes=${2:-3}
seconds=${3:-8}
out=${4:-$(mktemp -d)}
python=${PYTHON:-python3}
here=$(dirname "$0")
source "$here/pin.sh"
read -r -a models <<<"${MODELS:-mlp transformer-amp}"
read -r -a modes <<<"${MODES:-default expandable tensors}"
aa_processes=${AA_PROCESSES:-1}

# The allocator mode's environment, into `settings`.
mode_settings() {
  case $1 in
    default) settings=(PYTORCH_CUDA_ALLOC_CONF=) ;;
    expandable) settings=(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) ;;
    # What `gpumem record --tensors` sets (report/allocator/tensor_mode.cc) where none was set.
    tensors) settings=(PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
                       XLA_PYTHON_CLIENT_ALLOCATOR=platform TF_GPU_ALLOCATOR=cuda_malloc_async
                       "GPUMEM_TENSORS=PYTORCH_CUDA_ALLOC_CONF was unset; XLA_PYTHON_CLIENT_ALLOCATOR was unset; TF_GPU_ALLOCATOR was unset") ;;
    *) return 1 ;;
  esac
}

# The model's arguments to step_time_timed.py, into `model_args`.
model_arguments() {
  case $1 in
    mlp) model_args=(--model mlp) ;;
    transformer-amp) model_args=(--model transformer --amp) ;;
    *) return 1 ;;
  esac
}

for mode in "${modes[@]}"; do
  mode_settings "$mode" || { echo "run_recorders_side_by_side.sh: unknown mode '$mode'" >&2; exit 2; }
done
for model in "${models[@]}"; do
  model_arguments "$model" || { echo "run_recorders_side_by_side.sh: unknown model '$model'" >&2; exit 2; }
done

# Under gpumem (the benchmarks' build, with its Python observer as `gpumem record` gives it), or
# in the dry run without.
recorded=(LD_PRELOAD="$build/lib/libgpumem_bench.so" PYTHONPATH="$build/lib/python"
          GPUMEM_OUTPUT="$out/recorders.trace")
dry=()
if [[ ${GPUMEM_BENCH_DRY_RUN:-0} == 1 ]]; then
  recorded=()
  dry=(--dry-run)
fi

mkdir -p "$out"
for model in "${models[@]}"; do
  for mode in "${modes[@]}"; do
    : >"$out/$model.$mode.recorders.txt"
    : >"$out/$model.$mode.recorders_aa.txt"
  done
done
: >"$out/stderr.txt"
failures=0
# one MODEL MODE FILE [ENV...]: one process's JSON line appended to FILE.
one() {
  local model=$1 mode=$2 file=$3 line settings model_args
  shift 3
  mode_settings "$mode"
  model_arguments "$model"
  line=$(env "${settings[@]}" "$@" "${recorded[@]}" "${pin[@]}" $python "$here/step_time_timed.py" \
    "${dry[@]}" "${model_args[@]}" --recorders --seconds "$seconds" 2>>"$out/stderr.txt" | tail -1)
  if [[ $line == "{"* ]]; then
    echo "$line" >>"$file"
  else
    failures=$((failures + 1))
    echo "$model $mode ${*:-}: no result (its stderr is in $out/stderr.txt)" >&2
  fi
}
start=$SECONDS
rounds=$((processes > aa_processes ? processes : aa_processes))
for ((i = 0; i < rounds; i++)); do
  for model in "${models[@]}"; do
    for mode in "${modes[@]}"; do
      ((i < processes)) && one "$model" "$mode" "$out/$model.$mode.recorders.txt"
      ((i < aa_processes)) && one "$model" "$mode" "$out/$model.$mode.recorders_aa.txt" \
        GPUMEM_BENCH_TOGGLE_AA=1
    done
  done
done
rm -f "$out/recorders.trace"
notes="$((SECONDS - start)) s in all"
((${#dry[@]})) && notes+=", a dry run (no torch, no gpumem)"
((failures)) && notes+="; $failures process(es) failed"
$python "$here/toggle_summary.py" "$out" --header \
  "recorders side by side: ${models[*]} x ${modes[*]}, $processes processes (+ $aa_processes A/A) x ${seconds} s each, windows of 25 (mlp) / 10 (transformer) steps in Williams orders ABDC BCAD CDBA DACB, ${pin[*]:-unpinned}; $notes"
