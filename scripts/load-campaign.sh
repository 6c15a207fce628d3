#!/usr/bin/env bash
# load-campaign.sh: do simulated multi-process runs repeat exactly on a host
# busy with other work? Writes bench/results/load-campaign-<date>.md.
#
#   scripts/load-campaign.sh [--build DIR] [--hogs N] [--rounds N] [--out FILE]
#
# Starts N CPU- and memory-bound processes (default: twice the cores), then,
# beside them, for each of --rounds rounds (default 3):
#   determinism  build/tests/sim/sim_determinism_tests: four processes in
#                lockstep, eight runs that must end at the same virtual times
#                (one of them alongside CPU load of its own)
#   micro        `msched bench micro --policies msched`: four jobs and the
#                coordinator at six footprints; every round's results.csv
#                must equal the idle host's
# and once on the idle host first, as the reference. Reports each step's wall
# time and whether it repeated. The test suite runs these tests on a host with
# only the suite's own load; this checks that host load changes no result,
# only how long it takes.
set -u -o pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=$repo/build
hogs=$(($(nproc) * 2))
rounds=3
out=$repo/bench/results/load-campaign-$(date +%Y-%m-%d).md
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --hogs) hogs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "load-campaign.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
for f in "$build/tests/sim/sim_determinism_tests" "$build/tools/msched"; do
  [ -x "$f" ] || { echo "load-campaign.sh: $f is missing; build first (README)" >&2; exit 2; }
done
work=$(mktemp -d)
hog_pids=()
cleanup() {
  [ ${#hog_pids[@]} -gt 0 ] && kill "${hog_pids[@]}" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# One hog: copies 64 MiB buffers in memory for ever (CPU and memory bandwidth).
start_hogs() {
  for _ in $(seq "$hogs"); do
    (while :; do dd if=/dev/zero of=/dev/null bs=64M count=64 status=none; done) &
    hog_pids+=($!)
  done
}
stop_hogs() {
  kill "${hog_pids[@]}" 2>/dev/null
  wait "${hog_pids[@]}" 2>/dev/null
  hog_pids=()
}

# results.csv holds virtual times and counts only: all of it must repeat.
micro_csv() {
  local dir=$1
  "$build/tools/msched" bench micro --policies msched --out "$dir" >/dev/null 2>&1 || return 1
  cat "$dir/results.csv"
}
seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

rows=()
diffs=()  # the rows of micro's results that differed from the idle round's
failed=0
run_round() {
  local label=$1 t0 verdict
  t0=$(date +%s.%N)
  if "$build/tests/sim/sim_determinism_tests" >"$work/det-$label.log" 2>&1; then verdict=repeated; else verdict=FAILED; failed=1; fi
  rows+=("| $label | determinism | $(seconds_since "$t0") | $verdict |")
  t0=$(date +%s.%N)
  if ! micro_csv "$work/micro-$label" >"$work/micro-$label.csv"; then
    verdict="FAILED (bench exited non-zero)"; failed=1
  elif [ "$label" = idle ] || cmp -s "$work/micro-idle.csv" "$work/micro-$label.csv"; then
    verdict=repeated
  else
    verdict="FAILED: $(diff "$work/micro-idle.csv" "$work/micro-$label.csv" | grep -c '^>') rows differ"; failed=1
    diffs+=("$label:" "$(diff "$work/micro-idle.csv" "$work/micro-$label.csv" | grep '^[<>]')")
  fi
  rows+=("| $label | micro | $(seconds_since "$t0") | $verdict |")
}

run_round idle
start_hogs
for r in $(seq "$rounds"); do run_round "loaded-$r"; done
stop_hogs

mkdir -p "$(dirname "$out")"
{
  echo "# Simulated runs under host load, $(date +%Y-%m-%d)"
  echo
  echo "Host: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')); commit $(git -C "$repo" rev-parse --short HEAD)."
  echo "Load: $hogs processes, each copying 64 MiB buffers in a loop (\`dd\`), beside the loaded rounds."
  echo "Method: \`scripts/load-campaign.sh --hogs $hogs --rounds $rounds\`. determinism is"
  echo "\`sim_determinism_tests\` (its runs must agree to the nanosecond); micro is"
  echo "\`msched bench micro --policies msched\`, whose results.csv must equal the idle round's."
  echo
  echo "| round | step | wall s | result |"
  echo "|---|---|---:|---|"
  printf '%s\n' "${rows[@]}"
  echo
  if [ ${#diffs[@]} -gt 0 ]; then
    echo "Rows of micro's results that differed (< idle round, > loaded round):"
    echo
    echo '```'
    printf '%s\n' "${diffs[@]}"
    echo '```'
    echo
  fi
  echo "Micro's results on the idle host:"
  echo
  echo '```'
  cat "$work/micro-idle.csv"
  echo '```'
} >"$out"
cat "$out"
exit $failed
