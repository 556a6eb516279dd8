# shellcheck shell=bash
# The compatibility matrix of the GPU check, sourced by tests/gpu/run.sh (which defines $build,
# $python and gpumem_here): gpumem must never change what a job does. Each script of
# tests/gpu/compat/ runs in each allocator mode twice, without gpumem and under `gpumem record`;
# a cell passes when both runs exit 0 with byte-identical stdout and the traces read.
#
#   compat_record OUT   runs every cell into OUT/compat/<script>/<mode>/{plain,gpumem}/
#   compat_check OUT    prints the table (a row per script, a column per mode); 1 if a cell failed
#
# A script that exits 77 in both runs is skipped (the reason: its stderr line `skipped: WHY`).

# COMPAT_SCRIPTS and COMPAT_MODES (space-separated) run and check a part of the matrix, where a
# job's time is limited: the whole of it takes about 10 minutes on two GPUs.
read -ra compat_scripts <<<"${COMPAT_SCRIPTS:-graph_capture compile amp dataloader ddp native_alloc oom_caught}"
read -ra compat_modes <<<"${COMPAT_MODES:-default expandable tensors}"
compat_ranks=2  # ddp.py's processes, one per GPU

# compat_alloc_conf MODE: PYTORCH_CUDA_ALLOC_CONF of the run without gpumem. The tensors mode is
# `gpumem record --tensors`, which sets backend:cudaMallocAsync itself.
compat_alloc_conf() {
  case $1 in
    default) echo "" ;;
    expandable) echo "expandable_segments:True" ;;
    tensors) echo "backend:cudaMallocAsync" ;;
  esac
}

# compat_program SCRIPT: SCRIPT's command line into the array compat_command. The program gets
# the caller's LD_LIBRARY_PATH in both runs, not the one gpumem_here gives the analyzer.
compat_program() {
  if [[ -n ${LD_LIBRARY_PATH-} ]]; then
    compat_command=(env LD_LIBRARY_PATH="$LD_LIBRARY_PATH")
  else
    compat_command=(env -u LD_LIBRARY_PATH)
  fi
  local interpreter
  # shellcheck disable=SC2154 # $python: run.sh's
  read -ra interpreter <<<"$python"  # PYTHON may carry arguments
  compat_command+=("${interpreter[@]}")
  if [[ $1 == ddp ]]; then
    # --standalone: a rendezvous on a free port, so runs one after another never clash.
    compat_command+=(-m torch.distributed.run --standalone --nnodes 1
                     --nproc_per_node "$compat_ranks" tests/gpu/compat/ddp.py)
  else
    compat_command+=("tests/gpu/compat/$1.py")
  fi
}

# compat_run_cell SCRIPT MODE CELL_DIR: SCRIPT without gpumem into CELL_DIR/plain, then under
# `gpumem record` into CELL_DIR/gpumem (its traces in CELL_DIR/gpumem/traces/).
compat_run_cell() {
  local script=$1 mode=$2 cell=$3
  local conf start record=(record) output=$cell/gpumem/traces
  start=$(date +%s%N)
  conf=$(compat_alloc_conf "$mode")
  compat_program "$script"
  mkdir -p "$cell/plain" "$output"
  PYTORCH_CUDA_ALLOC_CONF=$conf "${compat_command[@]}" >"$cell/plain/stdout" \
    2>"$cell/plain/stderr"
  echo $? >"$cell/plain/exit_code"
  if [[ $mode == tensors ]]; then
    conf=""
    record+=(--tensors)
  fi
  [[ $script == ddp ]] || output+=/$script.trace  # a directory: one trace per rank
  PYTORCH_CUDA_ALLOC_CONF=$conf gpumem_here "${record[@]}" -o "$output" -- \
    "${compat_command[@]}" >"$cell/gpumem/stdout" 2>"$cell/gpumem/stderr"
  echo $? >"$cell/gpumem/exit_code"
  printf 'compat %-14s %-10s exit %s without gpumem, %s with  %5.1fs\n' "$script" "$mode" \
    "$(<"$cell/plain/exit_code")" "$(<"$cell/gpumem/exit_code")" \
    "$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN {print (b - a) / 1e9}')"
}

compat_record() {
  local out=$1/compat script mode gpus
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c GPU)
  for script in "${compat_scripts[@]}"; do
    for mode in "${compat_modes[@]}"; do
      local cell=$out/$script/$mode
      rm -rf "${cell:?}"  # an earlier run's files would be taken for this run's
      mkdir -p "$cell"
      if [[ $script == ddp ]] && ((gpus < compat_ranks)); then
        echo "$gpus GPU(s), $compat_ranks needed" >"$cell/skipped"
        continue
      fi
      compat_run_cell "$script" "$mode" "$cell"
    done
  done
}

# compat_verdict SCRIPT CELL_DIR: the cell's verdict, `ok`, `FAIL (...)` or `skipped (...)`. The
# traces are read here (`gpumem report`, its output in CELL_DIR/gpumem/report.txt).
compat_verdict() {
  local script=$1 cell=$2 plain recorded traces wanted=1 status
  if [[ -f $cell/skipped ]]; then echo "skipped ($(<"$cell/skipped"))"; return; fi
  if [[ ! -f $cell/plain/exit_code || ! -f $cell/gpumem/exit_code ]]; then
    echo "FAIL (not run)"; return
  fi
  plain=$(<"$cell/plain/exit_code") recorded=$(<"$cell/gpumem/exit_code")
  if [[ $plain == 77 && $recorded == 77 ]]; then
    echo "skipped ($(sed -n 's/^skipped: //p' "$cell/plain/stderr" | head -1))"; return
  fi
  [[ $plain == 0 ]] || { echo "FAIL (exit $plain without gpumem)"; return; }
  [[ $recorded == 0 ]] || { echo "FAIL (exit $recorded)"; return; }
  [[ -s $cell/plain/stdout ]] || { echo "FAIL (no stdout)"; return; }
  if ! diff "$cell/plain/stdout" "$cell/gpumem/stdout" >"$cell/stdout.diff"; then
    echo "FAIL (stdout differs)"; return
  fi
  traces=$(find "$cell/gpumem/traces" -maxdepth 1 -name '*.trace' | wc -l)
  [[ $script == ddp ]] && wanted=$compat_ranks
  ((traces >= wanted)) || { echo "FAIL ($traces trace(s), $wanted wanted)"; return; }
  gpumem_here report "$cell/gpumem/traces" >"$cell/gpumem/report.txt" 2>&1
  status=$?
  ((status == 0)) || { echo "FAIL (gpumem report exit $status)"; return; }
  echo ok
}

# compat_check OUT: the table of compat_record's cells, then what each failed cell printed.
compat_check() {
  local out=$1/compat script mode verdict failed=() width=10
  local -A verdicts
  for script in "${compat_scripts[@]}"; do
    for mode in "${compat_modes[@]}"; do
      verdict=$(compat_verdict "$script" "$out/$script/$mode")
      verdicts[$script/$mode]=$verdict
      ((${#verdict} > width)) && width=${#verdict}
      [[ $verdict == FAIL* ]] && failed+=("$script/$mode: $verdict")
    done
  done
  echo "== compatibility: each script without gpumem and under gpumem record, stdout compared"
  printf '   %-14s' script
  for mode in "${compat_modes[@]}"; do printf ' %-*s' "$width" "$mode"; done
  echo
  for script in "${compat_scripts[@]}"; do
    printf '   %-14s' "$script"
    for mode in "${compat_modes[@]}"; do printf ' %-*s' "$width" "${verdicts[$script/$mode]}"; done
    echo
  done
  echo "   (default: PYTORCH_CUDA_ALLOC_CONF empty; expandable: expandable_segments:True;" \
    "tensors: gpumem record --tensors, against backend:cudaMallocAsync)"
  local failure
  for failure in ${failed[@]+"${failed[@]}"}; do
    local cell=$out/${failure%%:*}
    echo "-- $failure"
    if [[ $failure == *"stdout differs"* ]]; then
      head -10 "$cell/stdout.diff"
    elif [[ $failure == *"gpumem report"* ]]; then
      tail -3 "$cell/gpumem/report.txt"
    else
      tail -3 "$cell/gpumem/stderr" "$cell/plain/stderr" 2>/dev/null
    fi | sed 's/^/   /'
  done
  ((${#failed[@]} == 0))
}
