#!/usr/bin/env bash
# From nothing to a recorded trace: installs the Debian dependencies, builds, then records the
# leak_loop sample on the GPU (or, without a GPU, reads a trace that was recorded on an H200),
# reports it, and writes its HTML view to gpumem-report.html.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/install_deps.sh
export PATH=$PATH:/usr/local/cuda/bin
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)"
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU; then
  export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  trace=leak_loop.trace
  build/bin/gpumem record -o "$trace" -- build/bin/leak_loop
else
  trace=samples/traces/leak_loop-h200.trace
  echo "No GPU here: reading $trace, recorded on an NVIDIA H200 (samples/traces/README.md)."
fi
echo "== gpumem dump --counts $trace"
build/bin/gpumem dump --counts "$trace"
echo "== gpumem report $trace: the peak, and what was never freed, by line of code"
build/bin/gpumem report "$trace"
echo "== gpumem view $trace: the same as one HTML page (timeline, flame graphs, tables)"
build/bin/gpumem view -o gpumem-report.html "$trace"
echo "Open gpumem-report.html in a browser (it needs no network)."
