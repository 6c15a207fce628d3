#!/usr/bin/env bash
# Sets up, builds and runs every test: a check that every C++ file is
# formatted as .clang-format says (scripts/format.sh fixes them), the full
# build (core, simulator, hook, programs; warnings as errors), a clang build
# with -Wthread-safety
# (build-tsa/: lock contracts; nothing run), then the driver-free core and its
# tests again under AddressSanitizer and UBSan and then under
# ThreadSanitizer, and a short run of each fuzz target over its seeds
# (FUZZ_RUNS inputs each, 20000 by default, seed 1; build-fuzz/, clang;
# campaigns: scripts/fuzz.sh).
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)
export CUDAToolkit_ROOT="${CUDA_HOME:-/usr/local/cuda}"

echo "== format (clang-format, .clang-format)"
scripts/format.sh --check

echo "== build (build/)"
cmake -S . -B build -DMSCHED_WERROR=ON >/dev/null
cmake --build build -j "$jobs" >/dev/null
echo "== tests"
(cd build && ctest --output-on-failure -j "$jobs")

# clang's lock analysis over the core, the hook and the coordinator: every
# GUARDED_BY/REQUIRES in src/base/thread_annotations.h's terms is checked.
# Built only (the build above ran the tests); any warning fails it.
echo "== clang -Wthread-safety build of the core, the hook and mschedd (build-tsa/)"
CC=clang CXX=clang++ cmake -S . -B build-tsa -DMSCHED_THREAD_SAFETY=ON -DMSCHED_WERROR=ON >/dev/null
cmake --build build-tsa -j "$jobs" --target msched msched_core_tests mschedd >/dev/null

echo "== sanitizer build of src/ and its tests (build-asan/)"
cmake -S . -B build-asan -DMSCHED_SANITIZE=ON -DMSCHED_WERROR=ON >/dev/null
cmake --build build-asan -j "$jobs" >/dev/null
(cd build-asan && ctest --output-on-failure -j "$jobs")

echo "== fuzz targets, ${FUZZ_RUNS:-20000} inputs each from a fixed seed (build-fuzz/, clang)"
scripts/fuzz.sh --fresh --seed 1 --runs "${FUZZ_RUNS:-20000}"

# The driver-free core and its tests (the coordinator's server and its
# threads, the scheduler, the statistics) under ThreadSanitizer. A report
# halts the process and is also left in tsan-reports/, which must stay empty.
echo "== ThreadSanitizer build of src/ and its tests (build-tsan/)"
cmake -S . -B build-tsan -DMSCHED_TSAN=ON -DMSCHED_WERROR=ON >/dev/null
cmake --build build-tsan -j "$jobs" >/dev/null
reports="$PWD/build-tsan/tsan-reports"
rm -rf "$reports" && mkdir -p "$reports"
(cd build-tsan &&
 TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 log_path=$reports/tsan" \
   ctest --output-on-failure -j "$jobs")
if compgen -G "$reports/tsan*" >/dev/null; then
  echo "ThreadSanitizer reports:" >&2
  cat "$reports"/tsan* >&2
  exit 1
fi
