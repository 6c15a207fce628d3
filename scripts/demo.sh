#!/usr/bin/env bash
# The main job on a fresh machine: sets up, builds, and runs the quick form of
# the benchmark suite's micro-benchmark and LLM-decode scenarios on the
# simulated GPU (no GPU needed; about two minutes on two cores), printing
# msched's speedup over demand paging with the paper's figures beside it:
# first on h200-measured (the link of the H100 and H200 users have, as
# measured on one), then on the paper's testbed (rtx5080-pcie5).
# Results: ./msched-bench-demo/{h200-measured,rtx5080-pcie5}/report.md
# (tables, method, plots).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export CUDAToolkit_ROOT="${CUDA_HOME:-/usr/local/cuda}"
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
for device in h200-measured rtx5080-pcie5; do
  echo "== $device"
  build/tools/msched bench micro D --quick --device "$device" --out "msched-bench-demo/$device" "$@"
done
