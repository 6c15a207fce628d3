#!/usr/bin/env bash
# gpu-overhead.sh: what libmsched costs a job that is not oversubscribed, on a
# real NVIDIA GPU. Writes bench/results/gpu-overhead-<date>-<device>.md.
#
#   scripts/gpu-overhead.sh [--build DIR] [--repeats N] [--first-repeat K]
#                           [--deadline SECONDS] [--also WORK]... [--work DIR] [--out FILE]
#
# Three programs, each in three modes: without libmsched (none), with it loaded
# and MSCHED_MODE=off, and MSCHED_MODE=msched with no memory budget and no
# coordinator (the shipped templates predict, nothing is evicted):
#   launches  tests/gpu/buffers_job launches 200000: host ns per empty launch
#   train     tests/gpu/train.py 300: median step, steps 150-299
#   llama     tests/gpu/llama.py 16 2048 64: transformers Llama decode, median
#             ms per token after the first two
# Each repeat runs every program once in every mode, the modes in an order that
# rotates from repeat to repeat, so that drift in the machine (clocks, caches,
# other tenants) falls on all modes alike. The report gives each mode's median
# over the repeats and its ratio to none, and checks that every run's output
# (train's losses, llama's tokens, both as exact values) equals none's.
# --deadline stops starting repeats after that many seconds (the report says how
# many ran). A repeat takes about two minutes on an H200 (Python's start
# dominates), so five need more than one 10-minute call on a lent machine:
# run the rest in a second call with --first-repeat (its repeats numbered
# from K, the rotation going on), bring the first call's work folder along
# and name it with --also, and the report covers both (a lent machine that
# returns only a few files a call needs the work folder as one archive).
# Without a GPU it says so and exits 0.
set -u -o pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/scripts/gpu-common.sh"
build=$repo/build
repeats=5
first=1
also=()
deadline=0
work=
out=
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --first-repeat) first=$2; shift 2 ;;
    --also) also+=("$2"); shift 2 ;;
    --deadline) deadline=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: scripts/gpu-overhead.sh [--build DIR] [--repeats N] [--first-repeat K] [--deadline SECONDS]" \
         "[--also WORK]... [--work DIR] [--out FILE]" >&2
       exit 2 ;;
  esac
done
for n in "$repeats" "$first" "$deadline"; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "gpu-overhead: '$n' is not a count (--repeats, --first-repeat, --deadline)" >&2; exit 2; }
done
for w in ${also[@]+"${also[@]}"}; do
  [ -f "$w/runs.tsv" ] || { echo "gpu-overhead: --also $w holds no runs.tsv" >&2; exit 2; }
done
if ! gpu_present; then
  echo "gpu-overhead: no NVIDIA GPU here (nvidia-smi finds none); nothing to measure."
  exit 0
fi
lib=$build/hook/libmsched.so
[ -f "$lib" ] || { echo "gpu-overhead: $lib is missing; build msched or pass --build DIR" >&2; exit 1; }
gpu_facts
today=$(date +%Y-%m-%d)
work=${work:-$(mktemp -d /tmp/msched-gpu-overhead.XXXXXX)}
out=${out:-$repo/bench/results/gpu-overhead-$today-$slug.md}
mkdir -p "$work/logs"
gpu_compile "$repo/tests/gpu/buffers_job.cu" "$work/buffers_job" ||
  { echo "gpu-overhead: nvcc failed on buffers_job.cu" >&2; exit 1; }

# run_one PROGRAM MODE REPEAT: one timed run; a line of $work/runs.tsv.
run_one() {
  local prog=$1 mode=$2 rep=$3 name="$1-$2-$3" start end rc
  local cmd
  case $prog in
    launches) cmd=("$work/buffers_job" launches 200000) ;;
    train) cmd=(python3 "$repo/tests/gpu/train.py" 300) ;;
    llama) cmd=(python3 "$repo/tests/gpu/llama.py" 16 2048 64) ;;
  esac
  start=$(date +%s.%N)
  case $mode in
    none) timeout 120 "${cmd[@]}" >"$work/logs/$name.out" 2>&1 ;;
    *) LD_PRELOAD=$lib MSCHED_MODE=$mode MSCHED_COORD=off MSCHED_LOG_LEVEL=warn MSCHED_LOG=$work/logs/$name.log \
         MSCHED_STATS=$work/logs/$name.stats.json timeout 120 "${cmd[@]}" >"$work/logs/$name.out" 2>&1 ;;
  esac
  rc=$?
  end=$(date +%s.%N)
  printf '%s\t%s\t%s\t%s\t%s\n' "$rep" "$prog" "$mode" "$rc" "$(seconds_between "$start" "$end")" >>"$work/runs.tsv"
}

modes=(none off msched)
t0=$(date +%s)
: >"$work/runs.tsv"
done_repeats=0
for rep in $(seq "$first" $((first + repeats - 1))); do
  if [ "$deadline" -gt 0 ] && [ $(($(date +%s) - t0)) -ge "$deadline" ]; then
    echo "gpu-overhead: deadline of ${deadline}s reached after $done_repeats repeats" >&2
    break
  fi
  for prog in launches train llama; do
    for k in 0 1 2; do run_one "$prog" "${modes[$(((rep + k) % 3))]}" "$rep"; done
  done
  done_repeats=$((done_repeats + 1))
  echo "gpu-overhead: repeat $rep ($done_repeats of $repeats) done ($(($(date +%s) - t0)) s)" >&2
done

{
  echo "# What libmsched costs a job that fits: $device, $today"
  echo
  echo "Written by \`scripts/gpu-overhead.sh\` (commit $(git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)). Device: $device, driver $driver; $(python3 -c 'import torch, transformers; print("PyTorch", torch.__version__, "transformers", transformers.__version__)' 2>/dev/null || echo 'no PyTorch or transformers'); $(nproc) CPU cores. Raw logs: $work/logs."
  echo
  python3 "$repo/tests/gpu/summarize_overhead.py" ${also[@]+"${also[@]}"} "$work"
} >"$out.tmp" && mv "$out.tmp" "$out"
echo "gpu-overhead: wrote $out (logs in $work/logs)"
