#!/usr/bin/env bash
# One transformers Llama decoder (bench/traces/llama-16x2048-t2: 16 layers,
# hidden 2048, 2.2 GB; prefill of 32 tokens and two decoded tokens),
# replayed under msched on the simulated GPU, alone, under a budget of
# MSCHED_GPU_MEMORY=BUDGET against the same replay without one: the case
# "Fast on the link real GPUs have" measures (issue 53). It runs each twice,
# without host time between launches (the kernels' work alone) and with
# HOST_NS a launch standing for the real program's host time (81,000 ns: the
# decode took 55 ms a token without msched on an H200 over 678 launches a
# pass, docs/simulator.md), on the device profile given (default
# h200-measured, 16 GiB), and prints a Markdown table: virtual time, bytes
# each way, the ratio to the unbudgeted run and whether the checksums of
# every allocation match it.
#
# usage: scripts/llama-budget.sh [BUILD_DIR] [BUDGET] [PROFILE] [HOST_NS]
#        (defaults: build 1536MiB h200-measured 81000)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
budget=${2:-1536MiB}
profile=${3:-h200-measured}
host_ns=${4:-81000}
trace_xz=bench/traces/llama-16x2048-t2.trace.xz
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

xz -dc "$trace_xz" >"$work/llama.trace"
"$build/tools/msched-profile" analyze "$work/llama.trace" -o "$work/llama.templates.json" >/dev/null

# run NAME BUDGET HOST_NS: one replay on a fresh simulated device.
run() {
  local name=$1 limit=$2 host=$3
  local -a env=(LD_LIBRARY_PATH="$build/sim/lib" MSIM_DEVICE="llama-budget-$$-$name" MSIM_PROFILE="$profile"
    MSIM_HBM_BYTES=16GiB MSIM_STATS="$work/$name.sim.json" LD_PRELOAD="$build/hook/libmsched.so"
    MSCHED_MODE=msched MSCHED_COORD=off MSCHED_TEMPLATES="$work/llama.templates.json")
  [[ $limit != none ]] && env+=(MSCHED_GPU_MEMORY="$limit")
  env -u MSCHED_GPU_MEMORY "${env[@]}" "$build/sim/msim-run" --replay "$work/llama.trace" \
    --host-ns-per-launch "$host" --json "$work/$name.json" >/dev/null
}

for host in 0 "$host_ns"; do
  run "none-$host" none "$host"
  run "budget-$host" "$budget" "$host"
done

python3 - "$work" "$budget" "$profile" "$host_ns" <<'EOF'
import json, sys
work, budget, profile, host_ns = sys.argv[1:]
def load(name):
    return json.load(open(f"{work}/{name}.json")), json.load(open(f"{work}/{name}.sim.json"))
print(f"Llama decode replay (llama-16x2048-t2), alone, on {profile} (16 GiB), msched with and without "
      f"MSCHED_GPU_MEMORY={budget}. Times are the simulator's virtual clock; bytes out are prefetches to "
      f"the host (evictions), dropped are read duplicates evicted without a copy.\n")
print("| host time a launch | budget | time ms | x unbudgeted | loaded GB | copied out GB | dropped GB | checksums |")
print("|---:|---|---:|---:|---:|---:|---:|---|")
for host in ["0", host_ns]:
    base, _ = load(f"none-{host}")
    for name, label in [(f"none-{host}", "none"), (f"budget-{host}", budget)]:
        r, s = load(name)
        b = s["bytes"]
        same = "equal" if r["checksums"] == base["checksums"] else "DIFFERENT"
        print(f"| {int(host):,} ns | {label} | {r['virtual_time_ns'] / 1e6:.1f} | "
              f"{r['virtual_time_ns'] / base['virtual_time_ns']:.2f}x | {b['h2d']['prefetch'] / 1e9:.2f} | "
              f"{b['d2h']['prefetch'] / 1e9:.2f} | {b['duplicate_dropped'] / 1e9:.2f} | {same} |")
EOF
