#!/usr/bin/env bash
# Installs what building and testing gpumem needs, from Debian packages only. The CUDA toolkit
# (headers, CUPTI, nvcc) is expected at /usr/local/cuda, as on the project's machines.
set -euo pipefail
# python3-jsonschema: tests/report/cli/json_schema_test.cc validates `gpumem report --json` against
# report/report.schema.json with it. chromium-headless-shell: tests/viewer/browser_test.py opens
# `gpumem view`'s page in it (Debian 12 bookworm / bookworm-security; the test is skipped without).
# golang-go: tests/report/cli/cmd_export_test.cc reads `gpumem export --format pprof` back with
# `go tool pprof`, the reference reader of that format (skipped without).
packages=(cmake ninja-build g++ pkg-config libunwind-dev libprotobuf-dev protobuf-compiler
          libabsl-dev libdw-dev libelf-dev zlib1g-dev libgtest-dev binutils python3 python3-jsonschema
          chromium-headless-shell golang-go)
missing=()
for package in "${packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) == 0 ]] || sudo=sudo
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
if [[ ! -e /usr/local/cuda/include/cuda.h ]] && ! command -v nvcc >/dev/null; then
  echo "install_deps: the CUDA toolkit (headers) was not found at /usr/local/cuda" >&2
  exit 1
fi
