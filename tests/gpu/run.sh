#!/usr/bin/env bash
# The whole GPU check of the recorder, on a machine with an NVIDIA GPU, CUDA and PyTorch.
#
#   tests/gpu/run.sh record OUT_DIR   record every sample and the PyTorch scripts into OUT_DIR
#                                     (needs only build/ and the real CUDA libraries: no protobuf)
#   tests/gpu/run.sh bench OUT_DIR    the benchmarks (step time, costs per event, the analyzer)
#                                     into OUT_DIR/step_time.txt and OUT_DIR/bench.txt
#   tests/gpu/run.sh recorders OUT_DIR    gpumem against PyTorch's own memory recorder, in one
#                                     process (tests/bench/run_recorders_side_by_side.sh: ~8
#                                     minutes; RECORDERS_MODES=default for a quick run) into
#                                     OUT_DIR/recorders.txt, then the self_timing step: apart
#                                     from bench, so that each fits in one device command
#   tests/gpu/run.sh self_timing OUT_DIR  only gpumem's own time per phase in the transformer with
#                                     AMP under `gpumem record --tensors` (OUT_DIR/self_timing.txt)
#   tests/gpu/run.sh allocators OUT_DIR   only the allocator-model runs (part of record)
#   tests/gpu/run.sh framework_ooms OUT_DIR   only PyTorch's out-of-memory errors under the
#                                     Python observer (part of record)
#   tests/gpu/run.sh exports OUT_DIR  only the memory-viz exports rendered by PyTorch (part of
#                                     record)
#   tests/gpu/run.sh small_stacks OUT_DIR   only CUDA on small stacks and in signal handlers,
#                                     without and under gpumem (part of record)
#   tests/gpu/run.sh advise OUT_DIR   only the runs `gpumem advise` is checked against: the
#                                     largest batch under a cap by real runs, recordings at two
#                                     other batch sizes, the remedy samples unfixed and fixed
#                                     (tests/gpu/advise.sh; part of record) into OUT_DIR/advise
#   tests/gpu/run.sh compat OUT_DIR   the compatibility matrix (tests/gpu/compat.sh), recorded and
#                                     checked: apart from `record`, so each fits in one device
#                                     command; `check` reads it from OUT_DIR/compat.
#                                     COMPAT_SCRIPTS / COMPAT_MODES pick a part of it
#   tests/gpu/run.sh speed OUT_DIR    how long `gpumem report` takes on real PyTorch traces, before
#                                     and after symbolization (OUT_DIR/speed.txt)
#   tests/gpu/run.sh bundled OUT_DIR  records samples/traces/ again, from a copy of the checkout at
#                                     /opt/gpumem (paths that exist nowhere else), into OUT_DIR/bundled
#   tests/gpu/run.sh check OUT_DIR    check OUT_DIR against the samples' expected answers and
#                                     PyTorch's own numbers (needs the full build; any machine)
#   tests/gpu/run.sh                  all three, into a temporary directory (exit 77: no GPU,
#                                     skipped)
#
# BUILD_DIR (default build) holds the build; CUDA_LIBS (default /usr/local/cuda/lib64) the real
# libcudart.so.13.
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build}
build=$(realpath -m "$build")  # absolute: a relative or absolute BUILD_DIR alike
cuda_libs=${CUDA_LIBS:-/usr/local/cuda/lib64}
python=${PYTHON:-python3}
# shellcheck source=tests/gpu/compat.sh
source tests/gpu/compat.sh
# shellcheck source=tests/gpu/advise.sh
source tests/gpu/advise.sh

have_gpu() { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU; }

# record_one NAME OUT_DIR ENV... -- COMMAND...: runs COMMAND under gpumem into OUT_DIR/NAME/.
record_one() {
  local name=$1 out=$2
  shift 2
  local env=()
  while [[ $1 != -- ]]; do env+=("$1"); shift; done
  shift
  rm -rf "${out:?}/$name"  # traces of an earlier run there would be counted as this run's
  mkdir -p "$out/$name"
  local start=$(date +%s%N)
  # PYTHONPATH: gpumem's Python observer, as `gpumem record` adds it.
  env "${env[@]}" LD_LIBRARY_PATH="$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    LD_PRELOAD="$build/lib/libgpumem.so" GPUMEM_OUTPUT="$out/$name/$name.trace" \
    PYTHONPATH="$build/lib/python${PYTHONPATH:+:$PYTHONPATH}" \
    "$@" >"$out/$name/stdout" 2>"$out/$name/stderr"
  echo $? >"$out/$name/exit_code"
  printf '%-28s exit %s  %5.1fs  %s\n' "$name" "$(cat "$out/$name/exit_code")" \
    "$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN {print (b - a) / 1e9}')" "$(ls "$out/$name" | grep -c '\.trace$') trace(s)"
}

record() {
  local out=$1
  mkdir -p "$out"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$out/gpu.txt"
  for expected in samples/*/expected.txt; do
    local name=$(basename "$(dirname "$expected")")
    record_one "$name" "$out" GPUMEM_SESSION_PID= -- "$build/bin/$name"
  done
  # PyTorch in its three allocator modes; the default mode also without gpumem for reference.
  local script=samples/pytorch/train_mlp.py
  PYTHONUNBUFFERED=1 $python "$script" >"$out/torch_reference.json" 2>"$out/torch_reference.err"
  record_one torch_default "$out" PYTORCH_CUDA_ALLOC_CONF= -- $python "$script" 20 \
    --summary "$out/torch_default/torch_memory_summary.txt"
  record_one torch_expandable "$out" PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True -- \
    $python "$script"
  record_one torch_async "$out" PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync -- \
    $python "$script"
  record_one torch_oom "$out" PYTORCH_CUDA_ALLOC_CONF= -- $python samples/pytorch/oom.py
  # The planted leak, at tensor level: growth must name the script's line (Python frames).
  record_one torch_leak "$out" PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync -- \
    $python samples/pytorch/leak_train.py 20
  # Launches per step against torch.profiler's kernel count: gpumem's launches of 15 steps minus
  # those of 5 steps, against the profiler's kernels in steps 5..14 (without gpumem, and with it:
  # the profiler must see the same under gpumem, and gpumem must keep recording).
  local kernels=samples/pytorch/kernel_count.py
  record_one torch_launches_5 "$out" PYTORCH_CUDA_ALLOC_CONF= -- $python "$kernels" 5
  record_one torch_launches_15 "$out" PYTORCH_CUDA_ALLOC_CONF= -- $python "$kernels" 15
  PYTHONUNBUFFERED=1 $python "$kernels" 15 --profile 5 15 >"$out/profiler_reference.json" \
    2>"$out/profiler_reference.err"
  record_one torch_profiled "$out" PYTORCH_CUDA_ALLOC_CONF= -- $python "$kernels" 15 --profile 5 15
  # ... and a profiler that starts after gpumem detached CUPTI (under cudaMallocAsync every
  # tensor is a memory call: past 1000 of them, by step 40, the memory callbacks retire).
  PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync PYTHONUNBUFFERED=1 $python "$kernels" 50 \
    --profile 40 50 >"$out/profiler_late_reference.json" 2>"$out/profiler_late_reference.err"
  record_one torch_profiled_late "$out" PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync -- \
    $python "$kernels" 50 --profile 40 50
  # Which driver calls stream capture forbids, on this driver: the fake CUDA must forbid the same
  # (tests/fake_cuda/capture_rules.expected; check compares).
  "$build/bin/capture_rules" >"$out/capture_rules.txt" 2>&1
  small_stacks "$out"
  ddp "$out"
  framework_ooms "$out"
  allocators "$out"
  exports "$out"
  advise_record "$out"
}

gpu_count() { nvidia-smi -L 2>/dev/null | grep -c GPU; }

# Two ranks of a DDP job (tests/gpu/ddp_step.py) under `gpumem record -o DIR -- torchrun`, into
# OUT_DIR/ddp/: one trace per rank. Skipped (OUT_DIR/ddp/skipped) with fewer than 2 GPUs.
ddp() {
  local out=$1
  rm -rf "${out:?}/ddp" && mkdir -p "$out/ddp"
  if (($(gpu_count) < 2)); then
    echo "fewer than 2 GPUs" >"$out/ddp/skipped"
    echo "ddp: skipped (fewer than 2 GPUs)"
    return 0
  fi
  PYTHONPATH="$build/lib/python${PYTHONPATH:+:$PYTHONPATH}" gpumem_here record \
    -o "$out/ddp/" -- env -u LD_LIBRARY_PATH $python -m torch.distributed.run --nproc_per_node 2 \
    tests/gpu/ddp_step.py >"$out/ddp/stdout" 2>"$out/ddp/stderr"
  echo $? >"$out/ddp/exit_code"
  echo "ddp: exit $(cat "$out/ddp/exit_code"), $(ls "$out/ddp" | grep -c '\.trace$') trace(s)"
}

# record_with_gpumem NAME OUT_DIR [OPTION...] -- COMMAND...: `gpumem record [OPTION...]` of
# COMMAND under PyTorch's default allocator into OUT_DIR/NAME/ (NAME.trace, and the stdout, stderr
# and exit_code of both: the program's output and gpumem's summary).
record_with_gpumem() {
  local name=$1 out=$2 options=()
  shift 2
  while [[ $1 != -- ]]; do options+=("$1"); shift; done
  shift
  rm -rf "${out:?}/$name" && mkdir -p "$out/$name"
  PYTORCH_CUDA_ALLOC_CONF= gpumem_here record "${options[@]}" -o "$out/$name/$name.trace" -- \
    env -u LD_LIBRARY_PATH "$@" >"$out/$name/stdout" 2>"$out/$name/stderr"
  echo $? >"$out/$name/exit_code"
  echo "$name: exit $(cat "$out/$name/exit_code")"
}

# PyTorch's out-of-memory error as gpumem's Python observer sees it: samples/pytorch/oom_capped.py
# (a set_per_process_memory_fraction cap: no driver call fails) and samples/pytorch/oom.py (no cap:
# the driver refuses), each in the three allocator modes (default, expandable segments,
# `gpumem record --tensors`), into OUT_DIR/oom_<script>_<mode>/.
framework_ooms() {
  local out=$1 script
  for script in oom_capped oom; do
    local name=${script}
    [[ $script == oom ]] && name=oom_uncapped
    record_one "${name}_default" "$out" PYTORCH_CUDA_ALLOC_CONF= -- \
      $python samples/pytorch/$script.py
    record_one "${name}_expandable" "$out" PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True -- \
      $python samples/pytorch/$script.py
    record_with_gpumem "${name}_tensors" "$out" --tensors -- $python samples/pytorch/$script.py
  done
}

# Each framework_ooms run: the script caught the error, and its trace has a framework_oom of the
# request the script printed (requested=N) whose stack names the script's marked line. (Under
# --tensors, cudaMallocAsync has no out-of-memory hook: only the error raised is seen, which needs
# CPython 3.12+ for a caught one.)
check_framework_ooms() {
  local out=$1 ok=0 dir
  for dir in "$out"/oom_capped_* "$out"/oom_uncapped_*; do
    local run=$(basename "$dir") script=samples/pytorch/oom_capped.py
    [[ $run == oom_uncapped_* ]] && script=samples/pytorch/oom.py
    local line=$(grep -n "# line: oom" "$script" | cut -d: -f1)
    [[ -e $dir/exit_code ]] || { echo "   $run: not recorded"; ok=1; continue; }
    local requested=$(sed -n 's/^requested=//p' "$dir/stdout")
    if [[ $(cat "$dir/exit_code") != 0 || -z $requested ]]; then
      echo "   $run: exit $(cat "$dir/exit_code"), no request printed: $(tail -2 "$dir/stderr" | tr '\n' ' ')"
      ok=1
      continue
    fi
    local dump=$("$build/bin/gpumem" dump --symbolize "$dir"/*.trace 2>/dev/null) found=""
    local oom stack
    while read -r oom; do
      stack=$(grep -o ' stack=[0-9]*' <<<"$oom" | cut -d= -f2)
      grep -q " stack id=$stack frames=.*$(basename "$script"):$line in " <<<"$dump" &&
        found+=" $(grep -o 'source=[a-z]*' <<<"$oom" | cut -d= -f2)"
    done < <(grep -E " framework_oom .* requested=$requested( |$)" <<<"$dump")
    echo "   $run: requested=$requested; framework_oom at $(basename "$script"):$line from:${found:- none}"
    [[ -n $found ]] || ok=1
  done
  return $ok
}

# gpumem export --format memory-viz of every trace recorded, rendered by PyTorch's own
# torch.cuda._memory_viz (tests/gpu/render_memory_viz.py) into OUT_DIR/export/render.txt;
# OUT_DIR/export/list.txt pairs each snapshot with its trace (paths relative to OUT_DIR), for check.
exports() {
  local out=$1
  rm -rf "${out:?}/export"
  mkdir -p "$out/export"
  local pickles=()
  for trace in "$out"/*/*.trace; do
    [[ -e $trace ]] || continue
    local rel=${trace#"$out"/} name
    name=$(tr / _ <<<"${rel%.trace}").pickle
    # A damaged trace (a sample that crashes on purpose) still exports what was read: exit 2, and
    # the snapshot is there.
    gpumem_here export --format memory-viz "$trace" -o "$out/export/$name" 2>>"$out/export/export.err"
    if [[ -s $out/export/$name ]]; then
      echo "export/$name $rel" >>"$out/export/list.txt"
      pickles+=("$out/export/$name")
    else
      echo "export of $rel failed: $(tail -1 "$out/export/export.err")" >>"$out/export/render.txt"
    fi
  done
  ((${#pickles[@]})) && $python tests/gpu/render_memory_viz.py "${pickles[@]}" >>"$out/export/render.txt" 2>&1
  echo "export: ${#pickles[@]} snapshot(s) rendered: $(grep -c ': ok' "$out/export/render.txt") ok, $(grep -c 'FAIL\|failed' "$out/export/render.txt") failed"
}

# Allocator replay: three training scripts recorded at tensor level by `gpumem record
# --tensors` and under PyTorch's default allocator (the segments it really reserved), and two of
# them capped with set_per_process_memory_fraction at the smallest limit `gpumem whatif` says
# they fit in, and 2 MiB below it: the analyzer runs here, since the caps depend on its answer.
gpumem_here() { LD_LIBRARY_PATH=$build/lib/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$build/bin/gpumem" "$@"; }
allocators() {
  local out=$1 script
  for script in train_mlp train_cnn train_transformer; do
    record_with_gpumem "alloc_${script}_tensors" "$out" --tensors -- \
      $python samples/pytorch/$script.py 10
    record_one alloc_${script}_default "$out" PYTORCH_CUDA_ALLOC_CONF= -- \
      $python samples/pytorch/$script.py 10
  done
  for script in train_cnn train_transformer; do
    local trace=$out/alloc_${script}_tensors/alloc_${script}_tensors.trace
    gpumem_here whatif --json --allocator native --device-memory 80GiB "$trace" \
      >"$out/alloc_${script}_whatif.json"
    local smallest=$($python -c "import json,sys; print(json.load(open(sys.argv[1]))['allocators'][0]['devices'][0]['smallest_fit_bytes'])" "$out/alloc_${script}_whatif.json")
    # At the smallest fit S and 2 MiB under it (the boundary), and at 3/4 S and 5/4 S (clear cases).
    local cap
    for cap in $smallest $((smallest - 2 * 1024 * 1024)) $((smallest / 4 * 3)) $((smallest / 4 * 5)); do
      gpumem_here whatif --json --allocator native --device-memory "$cap" "$trace" \
        >"$out/alloc_${script}_whatif_$cap.json"
      PYTORCH_CUDA_ALLOC_CONF= $python samples/pytorch/$script.py 10 --memory-limit "$cap" \
        >"$out/alloc_${script}_cap_$cap.txt" 2>&1
      echo "$script capped at $cap: $(tail -1 "$out/alloc_${script}_cap_$cap.txt" | grep -o '"oom": [a-z]*')"
    done
  done
}

# The benchmarks, into OUT_DIR/step_time.txt and OUT_DIR/bench.txt: apart from `record`, so that
# each fits in one device command (on a fresh machine every PyTorch start takes ~11 s).
bench() {
  local out=$1
  mkdir -p "$out"
  # Step time of the PyTorch script in the tensor-level mode, with and without gpumem, A/B
  # interleaved, and with parts of gpumem off: what each costs.
  GPUMEM_BENCH_CUDA_LIBS=$cuda_libs PYTHON=$python \
    tests/bench/run_step_time.sh "$build" 5 300 "$out/step_time" >"$out/step_time.txt" 2>&1
  # The same step measured inside one process (recording paused and resumed): the precise figure.
  PYTHON=$python tests/bench/run_step_time_toggle.sh "$build" 5 1001 "$out/step_time_toggle" \
    >>"$out/step_time.txt" 2>&1
  # Cost per allocation and per free on the real driver.
  for mode in async sync; do
    GPUMEM_BENCH_CUDA_LIBS=$cuda_libs tests/bench/run_alloc_cost.sh "$build" 7 20000 $mode
  done >"$out/bench.txt" 2>&1
  # Cost per kernel launch on the real driver (1M launches of an empty kernel per run).
  GPUMEM_BENCH_CUDA_LIBS=$(dirname "$(ldconfig -p | awk '/libcuda.so.1 / {print $NF; exit}')") \
    tests/bench/run_launch_cost.sh "$build" 3 1000000 >>"$out/bench.txt" 2>&1
  # Python frame capture per event, on the GPU machine's Python (fake CUDA: no driver time in it).
  PYTHON=$python tests/bench/run_python_frames_cost.sh "$build" 5 100000 20 >>"$out/bench.txt" 2>&1
  # What the Python observer adds to each exception raised once torch is imported (the fake torch).
  PYTHON=$python tests/bench/run_python_raise_cost.sh "$build" 5 100000 >>"$out/bench.txt" 2>&1
  # What the settled Python observer (its list.append watch) adds to Python code and torch calls.
  PYTHON=$python tests/bench/run_python_observer_idle_cost.sh "$build" 2 40 >>"$out/bench.txt" 2>&1
  # Analyzer throughput on the GPU machine's CPU (one core; 50M events).
  LD_LIBRARY_PATH=$build/lib/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    GPUMEM_LIBUNWIND=$build/lib/libunwind.so.8 tests/bench/run_analyzer_throughput.sh "$build" 50000000 -- --runs 1 >>"$out/bench.txt" 2>&1
  # What gpumem itself adds, with no driver in the measurement at all.
  tests/bench/run_hook_cost.sh "$build" 7 >>"$out/bench.txt" 2>&1
  # Trace size: bytes an event of a 2-minute --tensors transformer run, whole and its second half
  # (the steady state a longer run converges to).
  LD_LIBRARY_PATH=$build/lib/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    PYTHON="env -u LD_LIBRARY_PATH $python" tests/bench/trace_size.sh "$build" 120 \
    >>"$out/bench.txt" 2>&1
  # What restarting the event references every GPUMEM_RESYNC_EVENTS events costs in size, and
  # what it saves of a trace damaged in its middle (2-minute runs, never and the default).
  LD_LIBRARY_PATH=$build/lib/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    PYTHON="env -u LD_LIBRARY_PATH $python" tests/bench/run_resync_cost.sh "$build" 120 \
    >>"$out/bench.txt" 2>&1
  # The same without stacks: how much of an event's cost is the unwinding (and what it evicts).
  GPUMEM_BENCH_STACK_DEPTH=0 GPUMEM_BENCH_CUDA_LIBS=$cuda_libs \
    tests/bench/run_alloc_cost.sh "$build" 7 20000 async >>"$out/bench.txt" 2>&1
  cat "$out/bench.txt"
}

# gpumem against PyTorch's own recorder (torch.cuda.memory._record_memory_history), both models in
# the three allocator modes, measured inside each process (tests/bench/
# run_recorders_side_by_side.sh): the Markdown table and the targets into OUT_DIR/recorders.txt,
# each process's line under OUT_DIR/recorders/; then self_timing.
recorders() {
  local out=$1
  mkdir -p "$out"
  MODES=${RECORDERS_MODES:-default expandable tensors} PYTHON=$python \
    tests/bench/run_recorders_side_by_side.sh "$build" 3 8 "$out/recorders" >"$out/recorders.txt" 2>&1
  cat "$out/recorders.txt"
  self_timing "$out"
}

# gpumem's own time per recording phase (GPUMEM_SELF_TIMING=1: core/self_timing.h's table, printed
# on stderr when the trace is finished) in samples/pytorch/train_transformer.py --amp under `gpumem
# record --tensors`: the table into OUT_DIR/self_timing.txt, the run under OUT_DIR/self_timing/.
self_timing() {
  local out=$1
  mkdir -p "$out"
  GPUMEM_SELF_TIMING=1 record_with_gpumem self_timing "$out" --tensors --no-symbolize --no-summary \
    -- $python samples/pytorch/train_transformer.py 300 --amp
  {
    echo "self timing: train_transformer.py 300 --amp under gpumem record --tensors, exit $(cat "$out/self_timing/exit_code"): $(tail -1 "$out/self_timing/stdout")"
    sed -n '/^gpumem: self timing/,/^gpumem:   process:/p' "$out/self_timing/stderr"
  } >"$out/self_timing.txt"
  rm -f "$out/self_timing/self_timing.trace"
  cat "$out/self_timing.txt"
}

# `gpumem report` on PyTorch traces at tensor level (transformer, 10, 40 and 300 steps: up to ~10 MB), recorded
# without symbols, then symbolized as `gpumem record` does at exit (tests/gpu/report_speed.py).
speed() {
  local out=$1/speed steps
  rm -rf "${out:?}" && mkdir -p "$out"
  for steps in ${SPEED_STEPS:-10 40 300}; do
    PYTORCH_CUDA_ALLOC_CONF= gpumem_here record --tensors --no-symbolize \
      -o "$out/transformer_$steps.trace" -- env -u LD_LIBRARY_PATH $python \
      samples/pytorch/train_transformer.py $steps >"$out/transformer_$steps.out" 2>&1
  done
  LD_LIBRARY_PATH=$build/lib/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} $python \
    tests/gpu/report_speed.py "$build/bin/gpumem" 3 "$out"/transformer_*[0-9].trace \
    >"$1/speed.txt" 2>&1
  cat "$1/speed.txt"
  rm -f "$out"/*.trace  # large; the figures are in speed.txt
}

# samples/traces/ recorded again by `gpumem record` (which symbolizes them at exit, with every
# binary at hand), from a copy of the checkout at /opt/gpumem: OUT_DIR/bundled/NAME.trace.
bundled() {
  local out=$1/bundled here=$PWD
  rm -rf "${out:?}" /opt/gpumem && mkdir -p "$out" /opt/gpumem
  cp -a . /opt/gpumem/ && cd /opt/gpumem || return 1
  local gpumem="$build/bin/gpumem" mode conf
  # The analyzer's libraries for gpumem; the samples find the real libcudart; PyTorch needs neither.
  export LD_LIBRARY_PATH=$build/lib/deps:$cuda_libs
  timed_record() {  # NAME ENV... -- PROGRAM...: gpumem record into OUT/NAME.trace, timed
    local name=$1 start=$(date +%s%N) env=()
    shift
    while [[ $1 != -- ]]; do env+=("$1"); shift; done
    shift
    env "${env[@]}" "$gpumem" record -o "$out/$name.trace" -- "$@" >"$out/$name.log" 2>&1
    echo "$name: exit $?, $(( ($(date +%s%N) - start) / 1000000 )) ms with the symbolization" \
      "and summary at exit" >>"$out/times.txt"
  }
  timed_record leak_loop GPUMEM_SESSION_PID= -- "$build/bin/leak_loop"
  timed_record static_cudart GPUMEM_SESSION_PID= -- "$build/bin/static_cudart"
  for mode in default expandable async; do
    conf=
    [[ $mode == expandable ]] && conf=expandable_segments:True
    [[ $mode == async ]] && conf=backend:cudaMallocAsync
    timed_record "train_mlp-$mode" PYTORCH_CUDA_ALLOC_CONF=$conf -- \
      env -u LD_LIBRARY_PATH $python samples/pytorch/train_mlp.py
  done
  timed_record oom_capped PYTORCH_CUDA_ALLOC_CONF= -- \
    env -u LD_LIBRARY_PATH $python samples/pytorch/oom_capped.py
  unset LD_LIBRARY_PATH
  cd "$here" || return 1
  cat "$out/times.txt"
  ls -l "$out"
}

# "N bytes (CALL)": the most gpumem added to one call's stack in OUT_DIR/small_stacks/measure-*.txt,
# comparing the runs' "stack CALL BYTES" lines in order; "none" when they do not pair up.
stack_added() {
  paste -d' ' <(grep '^stack ' "$1/measure-without.txt") <(grep '^stack ' "$1/measure-with.txt") |
    awk '$1 != "stack" || $4 != "stack" || $2 != $5 || NF != 6 { bad = 1 }
      { if ($6 - $3 > most || NR == 1) { most = $6 - $3; call = $2 } }
      END { if (bad || NR == 0) print "none"; else printf "%d bytes (%s)\n", most, call }'
}

# small_stacks with MODE (word-split: its arguments) on KIB KiB of the stack VARIABLE names, with
# the environment after it (gpumem's, or none), into FILE, then "exit STATUS" and "stack KIB KiB"
# after its output; returns its status.
run_on_stack() {
  local file=$1 variable=$2 kib=$3 mode=$4 status
  shift 4
  # shellcheck disable=SC2086 # the mode is the program's arguments
  env "$variable=$kib" LD_LIBRARY_PATH="$cuda_libs" "$@" "$build/bin/small_stacks" $mode \
    >"$file" 2>&1
  status=$?
  printf 'exit %s\nstack %s KiB\n' "$status" "$kib" >>"$file"
  return "$status"
}

# "STATUS KIB": the exit status and stack size that end a run_on_stack FILE.
run_on_stack_end() { tail -2 "$1" 2>/dev/null | awk '{printf "%s ", $2}'; }

# CUDA calls on small thread stacks and from a signal handler on a small sigaltstack
# (tests/integration/programs/small_stacks.cc), on the real libraries. NVIDIA's libcudart itself
# needs more than the 16 KiB (8 KiB in a handler) the fake CUDA runs on, so each mode first finds
# the least stack the program runs on without gpumem, in 4 KiB steps up to 128 KiB, then runs under
# gpumem on that much and, if that fails, on 4 KiB more: gpumem's hooks may use no more than 4 KiB
# of the caller's stack (README.md, "The program comes first"). OUT_DIR/small_stacks/<mode>.plain
# and .gpumem hold a run's output, then "exit STATUS" and "stack KIB KiB": the plain run that
# worked (else the last tried), and gpumem's last run. measure-without.txt and measure-with.txt:
# what each call wrote of a large stack, without and under gpumem.
small_stacks() {
  local out=$1/small_stacks mode kib
  rm -rf "${out:?}" && mkdir -p "$out"
  for mode in first-on-small-stack later-on-small-stack "first-on-small-stack deep" signals; do
    local name=${mode// /-} variable=SMALL_STACKS_KIB first=16 least= status
    [[ $mode == signals ]] && variable=SMALL_STACKS_ALT_KIB first=8
    for ((kib = first; kib <= 128; kib += 4)); do
      if run_on_stack "$out/$name.plain" "$variable" "$kib" "$mode"; then
        least=$kib
        break
      fi
    done
    if [[ -z $least ]]; then
      echo "small_stacks $mode: fails without gpumem on every stack up to 128 KiB: not tested"
      continue
    fi
    local tried=()
    for kib in "$least" $((least + 4)); do
      run_on_stack "$out/$name.gpumem" "$variable" "$kib" "$mode" \
        LD_PRELOAD="$build/lib/libgpumem.so" GPUMEM_OUTPUT="$out/$name.trace"
      status=$?
      tried+=("exit $status on $kib KiB")
      ((status == 0)) && break
    done
    echo "small_stacks $mode: runs on $least KiB without gpumem; with gpumem: ${tried[*]}"
  done
  # The bytes of stack each call wrote below its call point (a pre-filled 256 KiB stack), without
  # and under gpumem: what the hooks add to the real libraries' own use.
  LD_LIBRARY_PATH=$cuda_libs "$build/bin/small_stacks" measure >"$out/measure-without.txt" 2>&1
  LD_LIBRARY_PATH=$cuda_libs LD_PRELOAD="$build/lib/libgpumem.so" \
    GPUMEM_OUTPUT="$out/measure.trace" "$build/bin/small_stacks" measure \
    >"$out/measure-with.txt" 2>&1
  echo "small_stacks measure: $(stack_added "$out") (limit 4096)"
  # The static TLS of every thread, and a thread on the smallest stack that holds it: the same
  # with gpumem preloaded (its TLS would sit on every thread's stack).
  LD_LIBRARY_PATH=$cuda_libs "$build/bin/static_tls" >"$out/static_tls-without.txt" 2>&1
  LD_LIBRARY_PATH=$cuda_libs LD_PRELOAD="$build/lib/libgpumem.so" \
    GPUMEM_OUTPUT="$out/static_tls.trace" "$build/bin/static_tls" >"$out/static_tls-with.txt" 2>&1
  echo "static TLS: $(cat "$out/static_tls-without.txt") without gpumem; $(cat "$out/static_tls-with.txt") with"
}

# Prints `gpumem dump --counts` of a recorded run.
counts() { "$build/bin/gpumem" dump --counts "$1"/*.trace; }
count_of() { awk -v key="$2 $3" 'index($0, key " count=") == 1 {split($3, c, "="); print c[2]}' <<<"$1"; }
json_field() { $python -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
# last_json_field FILE KEY: KEY of the JSON object on FILE's last line (the samples' memory report).
last_json_field() { tail -1 "$1" | $python -c "import json,sys; print(json.loads(sys.stdin.read())[sys.argv[1]])" "$2"; }

# Each rank's trace without anomalies, NCCL's buffers labelled, and the combined report's table
# with a row for each of ranks 0 and 1.
check_ddp() {
  local dir=$1 trace ok=0
  [[ $(cat "$dir/exit_code" 2>/dev/null) == 0 ]] || { echo "   torchrun exited $(cat "$dir/exit_code" 2>/dev/null): $(tail -3 "$dir/stderr")"; ok=1; }
  local traces=("$dir"/*.trace)
  ((${#traces[@]} == 2)) || { echo "   ${#traces[@]} traces, not one per rank"; ok=1; }
  for trace in "${traces[@]}"; do
    local line=$("$build/bin/gpumem" report "$trace" | grep -m1 '^memory events:')
    echo "   $(basename "$trace"): $line"
    [[ $line == *"anomalies: none"* ]] || ok=1
  done
  "$build/bin/gpumem" report --peak "$dir" >"$dir/report.txt"
  sed -n '/^ranks:/,/^$/p' "$dir/report.txt" | sed 's/^/   /'
  grep -Eq '^  0 +[0-9]+ +device ' "$dir/report.txt" || { echo "   no row for rank 0"; ok=1; }
  grep -Eq '^  1 +[0-9]+ +device ' "$dir/report.txt" || { echo "   no row for rank 1"; ok=1; }
  grep -q 'at the peak: .*NCCL [0-9.]* [KMG]iB' "$dir/report.txt" || { echo "   NCCL's memory not labelled"; ok=1; }
  grep -q '\[held by NCCL\]' "$dir/report.txt" || { echo "   no peak call site held by NCCL"; ok=1; }
  return $ok
}

check() {
  local out=$1 failures=0
  fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
  echo "== samples against their expected answers (GPU: $(cat "$out/gpu.txt" 2>/dev/null))"
  GPUMEM_GPU_TRACES=$out "$build/tests/samples_test" --gtest_brief=1 || fail "samples_test"

  echo "== PyTorch: every allocator mode recorded"
  for mode in default expandable async; do
    local dir=$out/torch_$mode
    [[ $(cat "$dir/exit_code") == 0 ]] || fail "torch_$mode exited $(cat "$dir/exit_code"): $(tail -3 "$dir/stderr")"
    echo "-- torch_$mode: $(tail -1 "$dir/stdout")"
    counts "$dir" | sed 's/^/   /'
  done
  local c_default=$(counts "$out/torch_default") c_expandable=$(counts "$out/torch_expandable")
  local c_async=$(counts "$out/torch_async")
  [[ $(count_of "$c_default" alloc cudaMalloc) -gt 0 ]] || fail "default mode: no cudaMalloc recorded"
  for api in cuMemAddressReserve cuMemCreate cuMemMap; do
    [[ $(count_of "$c_expandable" alloc $api) -gt 0 ]] || fail "expandable segments: no $api recorded"
  done
  local torch_allocs=$(json_field "$out/torch_default/stdout" allocation.all.allocated 2>/dev/null ||
                       last_json_field "$out/torch_default/stdout" allocation.all.allocated)
  local async_allocs=$(count_of "$c_async" alloc cudaMallocAsync)
  echo "-- cudaMallocAsync mode: $async_allocs allocation events; PyTorch's default-allocator count (allocation.all.allocated): $torch_allocs"
  [[ -n $torch_allocs && $async_allocs == "$torch_allocs" ]] || fail "allocation events ($async_allocs) != PyTorch's count ($torch_allocs)"
  # The pool's own size, from its attributes: its largest recorded reserved size against PyTorch's
  # max_memory_reserved() (under cudaMallocAsync, the pool's reserved high-water mark).
  local pool_reserved=$("$build/bin/gpumem" dump "$out"/torch_async/*.trace |
    awk '/pool_usage/ {for (i = 1; i <= NF; i++) if ($i ~ /^reserved=/) {split($i, r, "="); if (r[2] > m) m = r[2]}} END {print m + 0}')
  local torch_reserved=$(last_json_field "$out/torch_async/stdout" max_memory_reserved)
  echo "-- cudaMallocAsync mode: pool reserved at most $pool_reserved bytes (pool attributes); PyTorch's max_memory_reserved: $torch_reserved"
  [[ $pool_reserved == "$torch_reserved" ]] || fail "pool reserved ($pool_reserved) != PyTorch's max_memory_reserved ($torch_reserved)"

  echo "== gpumem report --summary against PyTorch's own torch.cuda.memory_summary() (default mode)"
  "$build/bin/gpumem" report --summary "$out"/torch_default/*.trace >"$out/gpumem_summary.txt"
  $python tests/gpu/compare_summary.py "$out/torch_default/torch_memory_summary.txt" \
    "$out/gpumem_summary.txt" || fail "summary table differs from torch.cuda.memory_summary()"

  echo "== PyTorch: launch events per step against torch.profiler's kernel count"
  launches() { counts "$1" | awk '/^launch / {for (i = 1; i <= NF; ++i) if ($i ~ /^count=/) {split($i, c, "="); n += c[2]}} END {print n + 0}'; }
  local l5=$(launches "$out/torch_launches_5") l15=$(launches "$out/torch_launches_15")
  local reference=$(last_json_field "$out/profiler_reference.json" profiler_kernels)
  local profiled=$(last_json_field "$out/torch_profiled/stdout" profiler_kernels)
  echo "-- gpumem: $l5 launches in 5 steps, $l15 in 15: $((l15 - l5)) in steps 5..14; torch.profiler: $reference kernels in steps 5..14 ($profiled with gpumem recording)"
  [[ $((l15 - l5)) == "$reference" ]] || fail "launch events of steps 5..14 ($((l15 - l5))) != torch.profiler's kernels ($reference)"
  [[ $profiled == "$reference" ]] || fail "torch.profiler saw $profiled kernels under gpumem, $reference without"
  echo "-- the profiled run under gpumem: $("$build/bin/gpumem" dump "$out/torch_profiled"/*.trace | grep -m1 ' cupti ' | cut -d' ' -f2-)"
  echo "   $(launches "$out/torch_profiled") launch events recorded"
  local late_reference=$(last_json_field "$out/profiler_late_reference.json" profiler_kernels)
  local late=$(last_json_field "$out/torch_profiled_late/stdout" profiler_kernels)
  local late_status=$("$build/bin/gpumem" dump "$out/torch_profiled_late"/*.trace | grep ' cupti ' | tail -1)
  echo "-- torch.profiler started at step 40, after gpumem detached CUPTI: $late kernels in steps 40..49 under gpumem, $late_reference without"
  echo "   last status: ...${late_status: -160}"
  [[ $late_status == *"CUPTI detached"* ]] || fail "CUPTI was not detached before the profiler started"
  [[ $late == "$late_reference" ]] || fail "torch.profiler saw $late kernels after gpumem detached CUPTI, $late_reference without"

  echo "== Python frames: the planted leak's line, and the script lines at the peak"
  local leak_line=$(grep -n "hidden = body(x)" samples/pytorch/leak_train.py | cut -d: -f1)
  "$build/bin/gpumem" report --growth "$out"/torch_leak/*.trace >"$out/torch_leak_growth.txt"
  "$build/bin/gpumem" dump "$out"/torch_leak/*.trace | grep -m1 ' python_status ' | sed 's/^/   /'
  grep -A4 "call site grows\|call sites grow" "$out/torch_leak_growth.txt" | head -8 | sed 's/^/   /'
  sed -n '/call sites\{0,1\} grows\{0,1\}$/,$p' "$out/torch_leak_growth.txt" | grep -q "leak_train.py:$leak_line" ||
    fail "growth does not name leak_train.py:$leak_line (hidden = body(x), the tensor kept each step)"
  # ... and, under it, the line of the append that keeps them (the Python observer, 3.12+).
  local append_line=$(grep -n "history.append(hidden)" samples/pytorch/leak_train.py | cut -d: -f1)
  grep -m1 -A12 "kept by Python references" "$out/torch_leak_growth.txt" | sed 's/^/   /' | grep -v "^ *[a-z_0-9]*\.so\|(.*\.c:[0-9]*)$" | head -6
  sed -n '/kept by Python references/,$p' "$out/torch_leak_growth.txt" | grep -q "leak_train.py:$append_line" ||
    fail "growth does not name leak_train.py:$append_line (history.append(hidden)) as what keeps the memory"
  "$build/bin/gpumem" report --peak --top 3 "$out"/torch_async/*.trace >"$out/torch_async_peak.txt"
  grep -m3 "train_mlp.py:" "$out/torch_async_peak.txt" | sed 's/^/   /'
  grep -q "train_mlp.py:" "$out/torch_async_peak.txt" || fail "the peak report names no line of train_mlp.py"

  echo "== PyTorch's out-of-memory exception reaches the script under gpumem"
  grep -q "caught torch.OutOfMemoryError" "$out/torch_oom/stdout" && [[ $(cat "$out/torch_oom/exit_code") == 0 ]] ||
    fail "torch_oom: $(cat "$out/torch_oom/stdout" "$out/torch_oom/stderr" | tail -3)"
  counts "$out/torch_oom" | grep -E 'alloc_failed' | sed 's/^/   /'

  echo "== PyTorch's out-of-memory errors seen by gpumem's Python observer (capped and not, 3 allocator modes)"
  check_framework_ooms "$out" || fail "a framework_oom is missing or wrong"

  echo "== gpumem export --format memory-viz, rendered by PyTorch's torch.cuda._memory_viz"
  if [[ -s $out/export/render.txt && -s $out/export/list.txt ]]; then
    echo "   $(wc -l <"$out/export/list.txt") snapshot(s); $(grep -c ': ok' "$out/export/render.txt") checks ok"
    grep -E 'FAIL|failed|SKIPPED' "$out/export/render.txt" | head -20 | sed 's/^/   /'
    grep -q -E 'FAIL|failed' "$out/export/render.txt" && fail "a snapshot did not render in torch.cuda._memory_viz"
    grep -q 'SKIPPED' "$out/export/render.txt" && fail "torch was not importable on the GPU machine: nothing rendered"
    grep -q 'trace_plot: ok' "$out/export/render.txt" || fail "no trace_plot rendered"
    # And each snapshot against the report of its trace, here with the full build.
    local pickle trace
    while read -r pickle trace; do
      "$build/bin/gpumem" report --json "$out/$trace" >"$out/export/report.json" 2>/dev/null
      "$build/bin/gpumem" dump --counts "$out/$trace" >"$out/export/counts.txt" 2>/dev/null
      $python tests/report/check_export.py memory-viz "$out/$pickle" --report "$out/export/report.json" \
        --counts "$out/export/counts.txt" >"$out/export/check.txt" ||
        fail "$pickle against its trace: $(head -3 "$out/export/check.txt" | tr '\n' ' ')"
    done <"$out/export/list.txt"
  else
    fail "no export results in $out/export (run.sh record's export step)"
  fi

  echo "== NCCL: DDP under torchrun, 2 ranks (tests/gpu/ddp_step.py)"
  if [[ -e $out/ddp/skipped ]]; then
    echo "   skipped: $(cat "$out/ddp/skipped")"
  else
    check_ddp "$out/ddp" || fail "ddp"
  fi

  echo "== allocator models against PyTorch (train_mlp, train_cnn, train_transformer)"
  $python tests/gpu/compare_allocators.py "$out" "$build/bin/gpumem" || fail "allocator models"

  echo "== small stacks and signal handlers: under gpumem on at most 4 KiB more stack than the real libraries need (small_stacks)"
  local stacks
  for stacks in "$out"/small_stacks/*.plain; do
    local name=$(basename "$stacks" .plain) with=${stacks%.plain}.gpumem plain_exit least with_exit used
    read -r plain_exit least <<<"$(run_on_stack_end "$stacks")"
    read -r with_exit used <<<"$(run_on_stack_end "$with")"
    if [[ $plain_exit != 0 ]]; then
      echo "   $name: not tested, the program fails without gpumem on every stack tried ($(tail -2 "$stacks" | tr '\n' ' '))"
      continue
    fi
    echo "   $name: runs on $least KiB without gpumem; with gpumem exit ${with_exit:-?} on ${used:-?} KiB"
    # It ran under gpumem, printing what it printed without it, on at most 4 KiB more.
    if [[ $with_exit != 0 ]] || ((used > least + 4)) ||
      ! diff -q <(grep -v '^gpumem: ' "$with" | head -n -1) <(head -n -1 "$stacks") >/dev/null; then
      fail "small_stacks $name: $(tail -3 "$with" 2>/dev/null | tr '\n' ' ')"
    fi
  done
  [[ -n $stacks ]] || fail "small_stacks was not recorded"
  local added
  added=$(stack_added "$out/small_stacks" 2>/dev/null)
  echo "   the most gpumem added to a CUDA call's stack: $added (limit 4096)"
  if [[ $added == none || -z $added ]]; then
    fail "small_stacks measure: the runs' stack lines are missing or name different calls"
  elif ((${added%% *} > 4096)); then
    fail "small_stacks measure: gpumem added $added to a call's stack, more than 4 KiB"
  fi
  local tls=$out/small_stacks/static_tls
  echo "   static TLS: $(cat "$tls-without.txt" 2>/dev/null) without gpumem, $(cat "$tls-with.txt" 2>/dev/null) with"
  # The thread started without gpumem (pthread_create returned 0), and the same with it.
  if ! grep -q '_bytes=0$' "$tls-without.txt" 2>/dev/null; then
    fail "static TLS: the thread on the smallest stack did not start even without gpumem"
  elif ! cmp -s "$tls-without.txt" "$tls-with.txt"; then
    fail "static TLS differs under gpumem: threads on small stacks could not start"
  fi

  echo "== stream capture: the driver forbids what the fake CUDA forbids (capture_rules)"
  if grep -v '^#' tests/fake_cuda/capture_rules.expected | diff - "$out/capture_rules.txt" \
    >"$out/capture_rules.diff"; then
    echo "   $(grep -c 'call=900' "$out/capture_rules.txt") of $(wc -l <"$out/capture_rules.txt") calls during a capture were refused, as the fake refuses them"
  else
    head -20 "$out/capture_rules.diff" | sed 's/^/   /'
    fail "capture_rules: this driver's rules differ from tests/fake_cuda/capture_rules.expected"
  fi

  echo "== gpumem advise against real runs: the largest batch under a cap, and remedies' savings"
  if [[ -d $out/advise ]]; then
    $python tests/gpu/check_advise.py "$out" "$build/bin/gpumem" || fail "gpumem advise"
  else
    echo "   skipped: $out/advise not recorded (tests/gpu/run.sh advise OUT_DIR)"
  fi

  if [[ -d $out/compat ]]; then
    compat_check "$out" || fail "compatibility matrix: a job ran differently under gpumem"
  else
    fail "compatibility matrix not recorded (tests/gpu/run.sh compat OUT_DIR)"
  fi

  echo "== cost (from the GPU run)"
  cat "$out/bench.txt" 2>/dev/null
  cat "$out/step_time.txt" 2>/dev/null || true
  cat "$out/recorders.txt" "$out/self_timing.txt" 2>/dev/null || true
  if ((failures)); then echo "GPU check: $failures failure(s)"; return 1; fi
  echo "GPU check: all passed"
}

case ${1:-all} in
  record) record "$2" ;;
  bench) bench "$2" ;;
  recorders) recorders "$2" ;;
  self_timing) self_timing "$2" ;;
  check) check "$2" ;;
  allocators) allocators "$2" ;;
  framework_ooms) framework_ooms "$2" ;;
  exports) exports "$2" ;;
  small_stacks) small_stacks "$2" ;;
  speed) speed "$2" ;;
  bundled) bundled "$2" ;;
  advise) advise_record "$2" ;;
  compat)
    have_gpu || { echo "no NVIDIA GPU here: GPU checks skipped"; exit 77; }
    compat_record "$2"
    compat_check "$2"
    ;;
  all)
    have_gpu || { echo "no NVIDIA GPU here: GPU checks skipped"; exit 77; }
    out=$(mktemp -d)
    record "$out" && compat_record "$out" && bench "$out" && check "$out"
    ;;
  *) echo "usage: $0 [record OUT_DIR | bench OUT_DIR | recorders OUT_DIR | check OUT_DIR | compat OUT_DIR | advise OUT_DIR]" >&2; exit 2 ;;
esac
