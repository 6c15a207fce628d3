#!/usr/bin/env bash
# Sets up, builds and runs every test: the full build (core, simulator,
# hook, programs; warnings as errors), then the driver-free core and its
# tests again under AddressSanitizer and UBSan. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)
export CUDAToolkit_ROOT="${CUDA_HOME:-/usr/local/cuda}"

echo "== build (build/)"
cmake -S . -B build -DMSCHED_WERROR=ON >/dev/null
cmake --build build -j "$jobs" >/dev/null
echo "== tests"
(cd build && ctest --output-on-failure -j "$jobs")

echo "== sanitizer build of src/ and its tests (build-asan/)"
cmake -S . -B build-asan -DMSCHED_SANITIZE=ON -DMSCHED_WERROR=ON >/dev/null
cmake --build build-asan -j "$jobs" >/dev/null
(cd build-asan && ctest --output-on-failure -j "$jobs")
