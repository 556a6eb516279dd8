#!/usr/bin/env bash
# Fuzzes the trace reader: configures and builds the clang + libFuzzer + ASan/UBSan build in a
# directory of its own, then runs tests/fuzz/trace_reader_fuzz.cc for SECONDS (default 600) on the
# seed corpus, and prints libFuzzer's final stats. Exit 0: no crash, leak, timeout or broken
# invariant; otherwise libFuzzer's status, with the input saved under $FUZZ_BUILD_DIR/artifacts/.
#
#   tests/fuzz/run.sh [SECONDS]
#   FUZZ_BUILD_DIR  the build directory (default /tmp/gpumem-fuzz-build)
#
# A crash: reproduce with `$FUZZ_BUILD_DIR/tests/trace_reader_fuzz ARTIFACT`, fix, and check the
# input in under tests/fuzz/regressions/ with a test in tests/core/ or tests/report/.
# New inputs the fuzzer finds go to $FUZZ_BUILD_DIR/corpus, never into tests/fuzz/corpus.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-600}
build=${FUZZ_BUILD_DIR:-/tmp/gpumem-fuzz-build}
export PATH=$PATH:/usr/local/cuda/bin

if ! command -v clang++ >/dev/null || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "run.sh: needs clang and libFuzzer: apt-get install -y clang libclang-rt-14-dev" >&2
  exit 2
fi
if [ -f "$build/CMakeCache.txt" ] &&
   ! grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$(pwd -P)" "$build/CMakeCache.txt"; then
  echo "run.sh: $build was configured from other sources; remove it or set FUZZ_BUILD_DIR" >&2
  exit 2
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUMEM_FUZZ=ON \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang >"$build.configure.log" 2>&1 ||
  { cat "$build.configure.log" >&2; exit 2; }
cmake --build "$build" --target trace_reader_fuzz -j "$(nproc)"

mkdir -p "$build/corpus" "$build/artifacts"
# The input's file in /dev/shm or /tmp, one per fuzzer process (libFuzzer ends without atexit
# handlers): this run's own only, since other checkouts may be fuzzing on the same machine.
fuzzer=""
cleanup() {
  if [ -n "$fuzzer" ]; then rm -f "/dev/shm/gpumem-fuzz-$fuzzer.trace" "/tmp/gpumem-fuzz-$fuzzer.trace"; fi
}
trap cleanup EXIT

# -close_fd_mask=2: the commands' "gpumem: error:" lines are not shown (libFuzzer's own output
# and the sanitizers' reports still are). The fuzzer silences stdout itself. One process, one job.
status=0
# The regressions are seeds too: each start replays every input that once crashed a reader.
"$build/tests/trace_reader_fuzz" "$build/corpus" tests/fuzz/corpus tests/fuzz/regressions \
  -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=60 \
  -print_final_stats=1 -close_fd_mask=2 \
  -artifact_prefix="$build/artifacts/" >"$build/fuzz.log" 2>&1 &
fuzzer=$!
wait "$fuzzer" || status=$?
# The last coverage line, then the final stats.
grep -E '^#[0-9]+.*(DONE|cov:)' "$build/fuzz.log" | tail -1 || true
grep -E '^stat::' "$build/fuzz.log" || true
if [ "$status" -ne 0 ]; then
  echo "run.sh: the fuzzer failed (status $status); see $build/fuzz.log:" >&2
  grep -E 'ERROR|SUMMARY|runtime error|trace_reader_fuzz:|Test unit written' "$build/fuzz.log" >&2 || true
fi
exit "$status"
