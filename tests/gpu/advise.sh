# shellcheck shell=bash
# The `gpumem advise` part of the GPU check, sourced by tests/gpu/run.sh (which defines $python,
# json_field, last_json_field and record_with_gpumem): real runs that tests/gpu/check_advise.py
# (run.sh check) holds advise's answers to, all under PyTorch's default (native) allocator.
#
#   advise_record OUT   records into OUT/advise/:
#     transformer/, cnn/   search/: the largest batch that fits under a cap, by real runs
#                          (tests/gpu/largest_batch.py: every run's output and search.json);
#                          b8/, b16/: `gpumem record --tensors` at two other batch sizes;
#                          transformer/oom_bN/: a run at a batch N that does not fit 8 GiB, under
#                          `gpumem record` (the README's worked example), and example_bN/ the
#                          same batch recorded uncapped (oom_batch: N); cnn/budget: its cap
#     growing_list/, no_grad_eval/   tensors/: `gpumem record --tensors` of the unfixed script;
#                          unfixed.json, fixed.json: the script and its fix without gpumem
#
# The three groups run side by side (each PyTorch start takes seconds), each search's runs too.

advise_steps=3
# 8 GiB: the worked example of a run that does not fit an 8 GiB card.
advise_transformer_budget=8589934592
advise_transformer=(samples/pytorch/train_transformer.py "$advise_steps" --sequence 512)
advise_cnn=(samples/pytorch/train_cnn.py "$advise_steps")
advise_recorded_batches=(8 16)

# advise_parallel FREE_MIB PERCENT BUDGET: how many runs capped at BUDGET bytes (each with about
# 1 GiB more for its CUDA context) fit in PERCENT of the GPU's free memory, from 1 to 6.
advise_parallel() {
  local runs=$(($1 * $2 / 100 / ($3 / 1048576 + 1024)))
  echo $((runs < 1 ? 1 : runs > 6 ? 6 : runs))
}

# advise_search DIR BUDGET PARALLEL SCRIPT...: the largest batch of SCRIPT under BUDGET, by real
# runs, into DIR/search/.
advise_search() {
  local dir=$1 budget=$2 parallel=$3
  shift 3
  # shellcheck disable=SC2086,SC2154 # $python: run.sh's, and it may carry arguments
  PYTORCH_CUDA_ALLOC_CONF='' $python tests/gpu/largest_batch.py --budget "$budget" \
    --out "$dir/search" --parallel "$parallel" -- $python "$@"
}

# advise_record_batches DIR SCRIPT...: SCRIPT at each of advise_recorded_batches, uncapped, under
# `gpumem record --tensors` into DIR/bN/.
advise_record_batches() {
  local dir=$1 batch
  shift
  for batch in "${advise_recorded_batches[@]}"; do
    # shellcheck disable=SC2086
    record_with_gpumem "b$batch" "$dir" --tensors -- $python "$@" --batch "$batch"
  done
}

# The transformer at 8 GiB: the search, a run at the next power of two above the answer (it
# runs out of memory), and the two recordings.
advise_transformer() {
  local dir=$1/transformer budget=$advise_transformer_budget
  mkdir -p "$dir"
  advise_search "$dir" "$budget" "$(advise_parallel "$2" 65 "$budget")" "${advise_transformer[@]}"
  local largest batch=1
  largest=$(json_field "$dir/search/search.json" largest)
  if ((largest > 0)); then
    while ((batch <= largest)); do batch=$((batch * 2)); done
    # shellcheck disable=SC2086
    record_with_gpumem "oom_b$batch" "$dir" -- $python "${advise_transformer[@]}" \
      --batch "$batch" --memory-limit "$budget"
    # The same batch recorded uncapped, as a user would on a larger card: the worked example's
    # first trace (its second is b16).
    echo "$batch" >"$dir/oom_batch"
    # shellcheck disable=SC2086
    record_with_gpumem "example_b$batch" "$dir" --tensors -- $python "${advise_transformer[@]}" \
      --batch "$batch"
  fi
  advise_record_batches "$dir" "${advise_transformer[@]}"
}

# The CNN, under three times its reserved peak at batch 8 (uncapped), rounded up to 64 MiB.
advise_cnn() {
  local dir=$1/cnn
  mkdir -p "$dir"
  # shellcheck disable=SC2086
  PYTORCH_CUDA_ALLOC_CONF='' $python "${advise_cnn[@]}" --batch 8 >"$dir/calibration.json" \
    2>"$dir/calibration.err"
  local reserved budget
  reserved=$(last_json_field "$dir/calibration.json" max_memory_reserved)
  budget=$(((3 * reserved + (64 << 20) - 1) / (64 << 20) * (64 << 20)))
  echo "$budget" >"$dir/budget"
  echo "cnn: max_memory_reserved $reserved at batch 8: budget $budget"
  ((budget > 0)) &&
    advise_search "$dir" "$budget" "$(advise_parallel "$2" 20 "$budget")" "${advise_cnn[@]}"
  advise_record_batches "$dir" "${advise_cnn[@]}"
}

# growing_list.py and no_grad_eval.py: recorded unfixed, and run unfixed and fixed without gpumem.
advise_remedies() {
  local script
  for script in growing_list no_grad_eval; do
    local dir=$1/$script
    mkdir -p "$dir"
    # shellcheck disable=SC2086
    record_with_gpumem tensors "$dir" --tensors -- $python "samples/pytorch/$script.py"
    PYTORCH_CUDA_ALLOC_CONF='' $python "samples/pytorch/$script.py" >"$dir/unfixed.json" \
      2>"$dir/unfixed.err"
    PYTORCH_CUDA_ALLOC_CONF='' $python "samples/pytorch/$script.py" --fixed >"$dir/fixed.json" \
      2>"$dir/fixed.err"
    echo "$script: max_memory_reserved $(last_json_field "$dir/unfixed.json" max_memory_reserved)" \
      "unfixed, $(last_json_field "$dir/fixed.json" max_memory_reserved) fixed"
  done
}

advise_record() {
  local out=$1/advise start
  start=$(date +%s)
  rm -rf "${out:?}" && mkdir -p "$out"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$out/gpu.txt"
  local free_mib
  free_mib=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits | head -1)
  advise_transformer "$out" "$free_mib" >"$out/transformer.log" 2>&1 &
  advise_cnn "$out" "$free_mib" >"$out/cnn.log" 2>&1 &
  advise_remedies "$out" >"$out/remedies.log" 2>&1
  wait
  cat "$out/transformer.log" "$out/cnn.log" "$out/remedies.log"
  echo "advise: $(($(date +%s) - start)) s; largest trace:" \
    "$(find "$out" -name '*.trace' -printf '%s %p\n' | sort -n | tail -1)"
}
