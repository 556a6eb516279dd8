#!/usr/bin/env bash
# Assembles what a GPU machine without build tools needs from a build here into
# .device-carry/build (ignored by git; copy it along with the checkout): the samples, libgpumem.so with the
# libunwind.so.8 it loads, the benchmarks (libgpumem_bench.so too), the analyzer, and the shared libraries the analyzer and
# its benchmark link (protobuf, Abseil, elfutils: the GPU machine has none of them).
# Usage: tests/gpu/carry.sh [BUILD_DIR]   then, on the GPU machine:
#   BUILD_DIR=.device-carry/build tests/gpu/run.sh record OUT   (and `bench OUT` in a second call)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
carry=.device-carry/build
rm -rf "$carry"
mkdir -p "$carry/bin" "$carry/lib/deps" "$carry/tests/bench"
for expected in samples/*/expected.txt; do
  name=$(basename "$(dirname "$expected")")
  cp "$build/bin/$name" "$carry/bin/"
done
# libgpumem_bench.so: the benchmarks' build, whose recording can be paused (run_step_time_toggle.sh).
cp "$build/lib/libgpumem.so" "$build/lib/libgpumem_bench.so" "$build/lib/libunwind.so.8" "$carry/lib/"
cp -r "$build/lib/python" "$carry/lib/"  # gpumem's Python observer
cp -r "$build/lib/fake" "$carry/lib/"  # for benchmarks that leave the driver out
cp -r "$build/tests/bench/alloc_cost" "$build/tests/bench/hook_cost" "$build/tests/bench/launch_cost" \
  "$build/tests/bench/analyzer_throughput" "$build/tests/bench/combined_merge" \
  "$build/tests/bench/trace_size" "$build/tests/bench/stub" "$build/tests/bench/libpc_sampler.so" \
  "$carry/tests/bench/"
cp "$build/bin/gpumem" "$carry/bin/"  # the analyzer benchmark also times `gpumem report`
cp "$build/bin/capture_rules" "$carry/bin/"  # what stream capture forbids, on the real driver
cp "$build/tests/programs/small_stacks" "$carry/bin/"  # CUDA on small stacks and in signal handlers
cp "$build/tests/programs/static_tls" "$carry/bin/"  # every thread's static TLS, with and without gpumem
ldd "$build/tests/bench/analyzer_throughput" "$build/tests/bench/combined_merge" "$build/bin/gpumem" |
  awk '/libprotobuf|libabsl|libz\.so|libdw|libelf|liblzma|libbz2|libzstd/ {print $3}' | sort -u |
  xargs -r cp -L -t "$carry/lib/deps/"
strip --strip-debug "$carry/tests/bench/analyzer_throughput" "$carry/tests/bench/combined_merge" \
  "$carry/bin/gpumem" "$carry/lib/deps/"* \
  2>/dev/null || true
du -sh "$carry"
