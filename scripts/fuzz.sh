#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, MSCHED_FUZZ=ON, clang) in
# build-fuzz/ and runs each for SECONDS (or RUNS inputs) over its seeds, one
# after another.
#   scripts/fuzz.sh [--fresh] [--seed S] SECONDS|--runs RUNS [TARGET...]
#   scripts/fuzz.sh 3600 templates trace             # a campaign: an hour each
#   scripts/fuzz.sh --fresh --seed 1 --runs 20000    # scripts/test.sh's short run
# Campaigns (by time, a new seed each) are where new bugs are found; each
# finding goes into the committed seeds once fixed, so every run replays it.
# The test command's run is a fixed number of inputs from a fixed seed: a
# regression check over the seeds plus a little fuzzing, the same length on
# any machine (libFuzzer is not bit-for-bit repeatable even so).
# TARGET is a name under tests/fuzz/corpus (default: all). What a run
# finds is kept in build-fuzz/corpus/TARGET and grows over runs; --fresh
# starts from the committed seeds alone and keeps nothing. A crash, a leak,
# a UBSan report or an input slower than 10 s fails the script and leaves the
# input in build-fuzz/artifacts/TARGET/. Prints the executions per target.
set -euo pipefail
cd "$(dirname "$0")/.."

usage="usage: scripts/fuzz.sh [--fresh] [--seed S] SECONDS|--runs RUNS [TARGET...]"
fresh=0 seed="" runs=""
while (($#)); do
  case "$1" in
    --fresh) fresh=1; shift ;;
    --seed) seed=${2:?$usage}; shift 2 ;;
    --runs) runs=${2:?$usage}; shift 2 ;;
    *) break ;;
  esac
done
if [ -n "$runs" ]; then
  limit=(-runs="$runs") what="$runs inputs"
else
  seconds=${1:?$usage}
  shift
  limit=(-max_total_time="$seconds") what="${seconds}s"
fi
targets=("$@")
if ((${#targets[@]} == 0)); then
  for d in tests/fuzz/corpus/*/; do targets+=("$(basename "$d")"); done
fi

export CUDAToolkit_ROOT="${CUDAToolkit_ROOT:-${CUDA_HOME:-/usr/local/cuda}}"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DMSCHED_FUZZ=ON >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]/#/fuzz_}" >/dev/null

dict_of() {
  case "$1" in
    templates|sim_workload|sim_module) echo tests/fuzz/json.dict ;;
    config) echo tests/fuzz/config.dict ;;
    sim_expr) echo tests/fuzz/sim_expr.dict ;;
    http_request) echo tests/fuzz/http.dict ;;
  esac
}

export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
mkdir -p build-fuzz/logs
failed=()
for t in "${targets[@]}"; do
  seeds="tests/fuzz/corpus/$t"
  [ -d "$seeds" ] || { echo "fuzz: no target '$t' (no $seeds)" >&2; exit 2; }
  if ((fresh)); then
    work=$(mktemp -d)
  else
    work="build-fuzz/corpus/$t"
    mkdir -p "$work"
  fi
  artifacts="build-fuzz/artifacts/$t/"
  mkdir -p "$artifacts"
  dict=$(dict_of "$t")
  log="build-fuzz/logs/$t.log"
  rc=0
  "build-fuzz/fuzz/fuzz_$t" "${limit[@]}" ${seed:+-seed="$seed"} -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$artifacts" ${dict:+-dict="$dict"} "$work" "$seeds" </dev/null >"$log" 2>&1 || rc=$?
  ((fresh)) && rm -rf "$work"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if ((rc != 0)); then
    echo "fuzz_$t: FAILED (exit $rc) after ${execs:-?} executions; input in $artifacts, log $log:"
    grep -E "ERROR: |runtime error:|SUMMARY:|Test unit written to|^    #[0-9]+ " "$log" | head -25 | sed 's/^/    /'
    failed+=("$t")
  else
    echo "fuzz_$t: ${execs:-?} executions (${what})"
  fi
done
if ((${#failed[@]})); then
  echo "fuzz: crashes in ${failed[*]}" >&2
  exit 1
fi
