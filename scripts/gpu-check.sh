#!/usr/bin/env bash
# gpu-check.sh: runs msched's checks on a real NVIDIA GPU and writes
# bench/results/gpu-<date>-<device>.md (raw logs beside it in a work folder).
#
#   scripts/gpu-check.sh [--build DIR] [--work DIR] [--out FILE]
#
# --build DIR holds an msched build (hook/libmsched.so, tools/msched, tools/mschedd,
# tools/msched-profile); default build/, built with CMake when missing. GPU machines
# without the Debian packages msched builds against can be given an x86-64 build made
# elsewhere. The CUDA test programs (tests/gpu/*.cu) are built here with nvcc.
#
# Safety: every managed allocation made here stays far below the card's free memory
# (smaller GPUs are emulated with msched's own budget, MSCHED_GPU_MEMORY), and nothing
# changes the card's clocks, power, compute mode or MIG. Without a GPU it says so and
# exits 0.
set -u -o pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/scripts/gpu-common.sh"
build=$repo/build
work=
out=
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: scripts/gpu-check.sh [--build DIR] [--work DIR] [--out FILE]" >&2; exit 2 ;;
  esac
done

if ! gpu_present; then
  echo "gpu-check: no NVIDIA GPU here (nvidia-smi finds none); nothing to check. The simulator's tests cover the rest."
  exit 0
fi
for tool in nvcc python3; do
  command -v $tool >/dev/null 2>&1 || { echo "gpu-check: $tool is needed on the GPU machine" >&2; exit 1; }
done

gpu_facts
today=$(date +%Y-%m-%d)
work=${work:-$(mktemp -d /tmp/msched-gpu-check.XXXXXX)}
out=${out:-$repo/bench/results/gpu-$today-$slug.md}
mkdir -p "$work/bin" "$work/logs"

if [ ! -f "$build/hook/libmsched.so" ] || [ ! -x "$build/tools/msched-profile" ]; then
  echo "gpu-check: building msched in $build"
  cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release >"$work/logs/cmake.log" 2>&1 &&
    cmake --build "$build" -j"$(nproc)" --target msched msched_cli mschedd msched-profile >>"$work/logs/cmake.log" 2>&1 || {
      echo "gpu-check: the build failed ($work/logs/cmake.log); build on a machine with msched's dependencies and pass --build DIR" >&2
      exit 1
    }
fi
lib=$build/hook/libmsched.so
for src in "$repo"/tests/gpu/*.cu; do
  name=$(basename "$src" .cu)
  gpu_compile "$src" "$work/bin/$name" || { echo "gpu-check: nvcc failed on $src" >&2; exit 1; }
done
bin=$work/bin

report() { echo "$*" >>"$out.tmp"; }
section() { report ""; report "## $1"; report ""; echo "gpu-check: $1" >&2; }
# run NAME TIMEOUT MODE CMD...: runs CMD with libmsched in MODE (none: not loaded) and
# its statistics in $work/logs/NAME.stats.json; output in $work/logs/NAME.out.
run() {
  local name=$1 limit=$2 mode=$3; shift 3
  local start end rc
  start=$(date +%s.%N)
  if [ "$mode" = none ]; then
    timeout "$limit" "$@" >"$work/logs/$name.out" 2>&1
  else
    LD_PRELOAD=$lib MSCHED_MODE=$mode MSCHED_LOG_LEVEL=warn MSCHED_STATS=$work/logs/$name.stats.json MSCHED_LOG=$work/logs/$name.log \
      MSCHED_COORD=${MSCHED_COORD:-off} timeout "$limit" "$@" >"$work/logs/$name.out" 2>&1
  fi
  rc=$?
  end=$(date +%s.%N)
  wall=$(seconds_between "$start" "$end")
  echo "$rc" >"$work/logs/$name.rc"
  return $rc
}
checksum() { sed -n 's/^checksum //p' "$work/logs/$1.out" | head -1; }
stats() { python3 "$repo/tests/gpu/summarize_stats.py" "$work/logs/$1.stats.json" "${@:2}"; }
logtail() { [ -s "$work/logs/$1.log" ] && { report '```'; tail -5 "$work/logs/$1.log" >>"$out.tmp"; report '```'; }; true; }

rm -f "$out.tmp"
report "# msched on a real GPU: $device, $today"
report ""
report "Written by \`scripts/gpu-check.sh\` (commit $(git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)). Device: $device, driver $driver, $(nvidia-smi --query-gpu=memory.total,memory.used --format=csv,noheader | head -1) (total, used at start); CUDA compiler $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'); $(python3 -c 'import torch; print("PyTorch", torch.__version__)' 2>/dev/null || echo 'no PyTorch'); $(nproc) CPU cores. Raw logs: $work/logs."

section "Unified-memory mechanisms (no msched)"
# GPU_CHECK_UM_GIB: the largest size the mechanisms are measured at (1, 4, 16 GiB up to it).
if run mechanisms 200 none "$bin/um_mechanisms" "${GPU_CHECK_UM_GIB:-16}"; then cat "$work/logs/mechanisms.out" >>"$out.tmp"
else report "um_mechanisms failed (exit $(cat "$work/logs/mechanisms.rc")):"; report '```'; tail -20 "$work/logs/mechanisms.out" >>"$out.tmp"; report '```'; fi

section "Launch hook overhead"
report "Host time per launch of an empty kernel, 200,000 launches each (buffers_job launches)."
report ""
report "| libmsched | ns per launch |"
report "|---|---:|"
for mode in none off msched; do
  run "launches-$mode" 120 "$mode" "$bin/buffers_job" launches 200000
  report "| $mode | $(sed -n 's/^launch \([0-9.]*\) ns.*/\1/p' "$work/logs/launches-$mode.out") |"
done
report ""
report "msched hook's own histogram (launch path): $(stats launches-msched hook. | tr '\n' ' ')"

section "A job over its memory budget: data and time in every mode"
budget=${GPU_CHECK_BUDGET:-4GiB}
report "buffers_job: 12 buffers of 512 MiB (6 GiB), 4 passes of an integer update over each buffer, then the data read back and hashed. msched and alloc keep within MSCHED_GPU_MEMORY=$budget; um runs on the whole card (the check never oversubscribes the real HBM). Templates for msched come from msched-profile on a 3 x 64 MiB run."
report ""
run profile-buffers 180 none "$build/tools/msched-profile" -o "$work/logs/buffers.templates.json" --report "$work/logs/buffers-profile.md" -- "$bin/buffers_job" work 3 64 2
report "msched-profile on buffers_job (3 x 64 MiB): exit $(cat "$work/logs/profile-buffers.rc"); $(sed -n 's/^msched-profile: wrote \(.*\) to .*/\1/p' "$work/logs/profile-buffers.out")."
report ""
report "| mode | budget | wall s | checksum | counters |"
report "|---|---|---:|---|---|"
ref=
for mode in none off um alloc msched msched-budget; do
  m=${mode%-budget}
  if [ "$mode" = msched-budget ] || [ "$mode" = alloc ]; then b=$budget; else b=card; fi
  if [ "$b" = card ]; then
    MSCHED_TEMPLATES=$work/logs/buffers.templates.json run "job-$mode" 120 "$m" "$bin/buffers_job" work 12 512 4
  else
    MSCHED_GPU_MEMORY=$b MSCHED_TEMPLATES=$work/logs/buffers.templates.json run "job-$mode" 120 "$m" "$bin/buffers_job" work 12 512 4
  fi
  rc=$(cat "$work/logs/job-$mode.rc")
  sum=$(checksum "job-$mode")
  [ -z "$ref" ] && ref=$sum
  verdict=$([ "$sum" = "$ref" ] && [ -n "$sum" ] && echo same || echo "DIFFERS (exit $rc)")
  report "| $mode | $b | $wall | $sum $verdict | $(stats "job-$mode" allocations.converted launches. bytes. errors. | tr '\n' ' ') |"
done
for mode in off um alloc msched msched-budget; do logtail "job-$mode"; done

section "A captured CUDA graph"
report "buffers_job graph: the 12 updates captured once as a CUDA graph and replayed 4 times (same data as above)."
report ""
report "| mode | wall s | checksum | counters |"
report "|---|---:|---|---|"
gref=
for mode in none um msched-budget; do
  m=${mode%-budget}
  if [ "$mode" = msched-budget ]; then
    MSCHED_GPU_MEMORY=$budget MSCHED_TEMPLATES=$work/logs/buffers.templates.json run "graph-$mode" 120 "$m" "$bin/buffers_job" graph 12 512 4
  else
    run "graph-$mode" 120 "$m" "$bin/buffers_job" graph 12 512 4
  fi
  sum=$(checksum "graph-$mode")
  [ -z "$gref" ] && gref=$sum
  report "| $mode | $wall | $sum $([ "$sum" = "$gref" ] && [ -n "$sum" ] && echo same || echo "DIFFERS (exit $(cat "$work/logs/graph-$mode.rc"))") | $(stats "graph-$mode" launches. graphs. bytes. errors. | tr '\n' ' ') |"
done
for mode in um msched-budget; do logtail "graph-$mode"; done

section "PyTorch training loop"
steps=${GPU_CHECK_STEPS:-300}
report "tests/gpu/train.py: $steps steps of a conv + MLP model (AdamW, fixed seeds, deterministic algorithms, a Triton kernel each step); each step's loss compared exactly with the run without libmsched."
report ""
report "| run | exit | losses | median step | counters |"
report "|---|---:|---|---|---|"
for cfg in none off um msched msched-expandable msched-async; do
  m=${cfg%%-*}
  case $cfg in
    *-expandable) conf=expandable_segments:True ;;
    *-async) conf=backend:cudaMallocAsync ;;
    *) conf= ;;
  esac
  PYTORCH_CUDA_ALLOC_CONF=$conf run "train-$cfg" 150 "$m" python3 "$repo/tests/gpu/train.py" "$steps"
  grep '^step ' "$work/logs/train-$cfg.out" >"$work/logs/train-$cfg.losses"
  if [ "$cfg" = none ]; then same="reference ($(wc -l <"$work/logs/train-none.losses") steps)"
  elif [ -s "$work/logs/train-$cfg.losses" ] && cmp -s "$work/logs/train-none.losses" "$work/logs/train-$cfg.losses"; then same=identical
  else same="DIFFER ($(wc -l <"$work/logs/train-$cfg.losses") lines)"; fi
  med=$(sed -n 's/^median step \([0-9.]*\) ms.*/\1 ms/p' "$work/logs/train-$cfg.out")
  report "| $cfg | $(cat "$work/logs/train-$cfg.rc") | $same | $med | $(stats "train-$cfg" allocations. launches. errors. lookups. | tr '\n' ' ') |"
done
run profile-train 300 none "$build/tools/msched-profile" -o "$work/logs/train.templates.json" \
  --report "$work/logs/train-profile.md" -- python3 "$repo/tests/gpu/train.py" 3 256
MSCHED_TEMPLATES=$work/logs/train.templates.json MSCHED_GPU_MEMORY=512MiB \
  run train-templates-budget 150 msched python3 "$repo/tests/gpu/train.py" "$steps"
grep '^step ' "$work/logs/train-templates-budget.out" >"$work/logs/train-templates-budget.losses"
same=$(cmp -s "$work/logs/train-none.losses" "$work/logs/train-templates-budget.losses" && echo identical || echo DIFFER)
report "| msched, templates from msched-profile (3 steps at width 256), budget 512 MiB | $(cat "$work/logs/train-templates-budget.rc") | $same | $(sed -n 's/^median step \([0-9.]*\) ms.*/\1 ms/p' "$work/logs/train-templates-budget.out") | $(stats train-templates-budget launches. bytes. errors. | tr '\n' ' ') |"
report ""
report "msched-profile on train.py (width 256, 3 steps): exit $(cat "$work/logs/profile-train.rc"); $(sed -n 's/^msched-profile: wrote \(.*\) to .*/\1/p' "$work/logs/profile-train.out")."
# The shipped templates on a trace at the width the runs above use (theirs
# were fitted at 256 and 512): which kernels' regions fail to evaluate
# there (the hook's errors.template_evaluation names none).
run trace-train-2048 300 none "$build/tools/msched-profile" --trace "$work/logs/train-2048.trace" -- \
  python3 "$repo/tests/gpu/train.py" 3 2048
run check-train-2048 120 none "$build/tools/msched-profile" check "$repo/templates/pytorch-2.11-cu130-sm90.templates.json" "$work/logs/train-2048.trace" \
  --report "$work/logs/train-2048-check.md"
report ""
report "The shipped templates checked on a CUPTI trace of train.py at width 2048 (3 steps; trace exit $(cat "$work/logs/trace-train-2048.rc"), check exit $(cat "$work/logs/check-train-2048.rc")): kernels with launches whose regions failed to evaluate (calls, failed):"
report ""
failing=$(awk -F'|' '/^\| [^-k]/ && $5+0 > 0 { printf "- %s: %d calls, %d failed\n", $2, $4, $5 }' "$work/logs/train-2048-check.md" 2>/dev/null)
report "${failing:-(none, or no check: see $work/logs/check-train-2048.out)}"
report ""
report "$(grep '^median' "$work/logs/train-none.out")"
for cfg in off um msched msched-expandable msched-async templates-budget; do
  if [ "$(cat "$work/logs/train-$cfg.rc")" != 0 ]; then report "train-$cfg output:"; report '```'; tail -15 "$work/logs/train-$cfg.out" >>"$out.tmp"; report '```'; fi
  logtail "train-$cfg"
done

section "msched-profile with CUPTI: templates at two sizes, checked at a third"
for n in 256 512 2048; do
  run "profile-$n" 180 none "$build/tools/msched-profile" --trace "$work/logs/profile-$n.trace" -- "$bin/profile_kernels" $n
done
run profile-fit 120 none "$build/tools/msched-profile" analyze "$work/logs/profile-256.trace" "$work/logs/profile-512.trace" \
  -o "$work/logs/profile.templates.json" --report "$work/logs/profile-fit.md"
run profile-check 120 none "$build/tools/msched-profile" check "$work/logs/profile.templates.json" "$work/logs/profile-2048.trace" \
  --report "$work/logs/profile-check.md"
report "Traces: exit $(cat "$work/logs/profile-256.rc") (256), $(cat "$work/logs/profile-512.rc") (512), $(cat "$work/logs/profile-2048.rc") (2048); fit exit $(cat "$work/logs/profile-fit.rc"); check exit $(cat "$work/logs/profile-check.rc")."
report ""
if [ -s "$work/logs/profile-check.md" ]; then cat "$work/logs/profile-check.md" >>"$out.tmp"
else report '```'; tail -15 "$work/logs/profile-check.out" "$work/logs/profile-2048.out" "$work/logs/profile-fit.out" >>"$out.tmp"; report '```'; fi

section "Two jobs time-sliced by mschedd"
report "Two buffers_job runs (12 x 512 MiB each, 40 passes of 16 rounds) started together under one mschedd with --gpu-memory 8GiB, against the same two run one after the other without msched. The coordinator is GPU 0's (mschedd --gpu 0, msched run --gpu 0) and each job finds it from its device (MSCHED_COORD=required: a job that cannot tell which GPU it is on fails)."
report ""
export MSCHED_SOCKET_DIR=$work/sockets
mkdir -p -m 0700 "$MSCHED_SOCKET_DIR"
sock=$MSCHED_SOCKET_DIR/gpu0.sock
"$build/tools/mschedd" --gpu 0 --gpu-memory 8GiB --log "$work/logs/mschedd.log" --trace "$work/logs/mschedd-trace.json" &
dpid=$!
wait_for_socket "$sock"
t0=$(date +%s.%N)
pids=()
for j in 1 2; do
  MSCHED_TEMPLATES=$work/logs/buffers.templates.json MSCHED_STATS=$work/logs/pair-$j.stats.json MSCHED_LOG=$work/logs/pair-$j.log \
    MSCHED_LOG_LEVEL=info MSCHED_COORD=required \
    timeout 150 "$build/tools/msched" run --gpu 0 --mem 6G --name "job$j" -- "$bin/buffers_job" work 12 512 40 16 \
    >"$work/logs/pair-$j.out" 2>&1 &
  pids+=($!)
done
wait "${pids[@]}"
t1=$(date +%s.%N)
"$build/tools/msched" status --gpu 0 >"$work/logs/pair-status.out" 2>&1
unset MSCHED_SOCKET_DIR
kill "$dpid" 2>/dev/null; wait "$dpid" 2>/dev/null
t2=$(date +%s.%N)
run seq-1 120 none "$bin/buffers_job" work 12 512 40 16
run seq-2 120 none "$bin/buffers_job" work 12 512 40 16
t3=$(date +%s.%N)
report "| run | wall s | checksums |"
report "|---|---:|---|"
report "| msched, both at once under mschedd | $(seconds_between "$t0" "$t1") | $(checksum pair-1) $(checksum pair-2) |"
report "| one after the other, no msched | $(seconds_between "$t2" "$t3") | $(checksum seq-1) $(checksum seq-2) |"
report ""
report "Job counters: $(stats pair-1 coordinator. bytes. | tr '\n' ' ')"
report ""
found=$(grep -ho "on the machine's GPU [0-9]*: its coordinator is at [^ ]*" "$work/logs/pair-1.log" "$work/logs/pair-2.log" | tr '\n' ';')
report "Which GPU each job found itself on: ${found:-no such line in the job logs}"
for j in 1 2; do [ -s "$work/logs/pair-$j.out" ] && { report '```'; tail -4 "$work/logs/pair-$j.out" >>"$out.tmp"; report '```'; }; logtail "pair-$j"; done

mv "$out.tmp" "$out"
echo "gpu-check: wrote $out (logs in $work/logs)"
