#!/usr/bin/env bash
# The main job on a fresh machine: sets up, builds, and runs the quick form of
# the benchmark suite's micro-benchmark and LLM-decode scenarios on the
# simulated GPU (no GPU needed; about a minute on two cores), printing
# msched's speedup over demand paging with the paper's figures beside it.
# Results: ./msched-bench-demo/report.md (tables, method, plots).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export CUDAToolkit_ROOT="${CUDA_HOME:-/usr/local/cuda}"
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
exec build/tools/msched bench micro D --quick --out msched-bench-demo "$@"
