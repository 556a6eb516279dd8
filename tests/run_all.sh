#!/usr/bin/env bash
# The whole test suite, as CI runs it: install dependencies, build, run every test. GPU-only
# tests report "skipped" on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/install_deps.sh
export PATH=$PATH:/usr/local/cuda/bin
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUMEM_WERROR=ON
cmake --build build -j "$(nproc)"
ctest --test-dir build -j "$(nproc)" --output-on-failure
