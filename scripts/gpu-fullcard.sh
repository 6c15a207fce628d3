#!/usr/bin/env bash
# gpu-fullcard.sh: msched on a real NVIDIA GPU that is really full.
# Writes bench/results/gpu-<date>-<device>-fullcard.md (raw logs in a work folder).
#
#   scripts/gpu-fullcard.sh [--build DIR] [--budget-s S] [--from STEP] [--to STEP]
#                           [--data-gib G] [--ctx-mib M] [--resume ARCHIVE] [--export DIR]
#                           [--work DIR] [--out FILE]
#
# Steps, in this order, each run as its own process under its own `timeout`
# (its cap below, or what is left of the budget if less; a step that would get
# less than its minimum is not started, and the run stops there):
#   1   (cap 180 s, min 60)  the decode over its budget: tests/gpu/llama.py 16 2048
#       without libmsched, in msched mode without a budget and under
#       MSCHED_GPU_MEMORY=1536MiB; median ms a token, bytes in, out and dropped a
#       pass, tokens compared; where the simulator's prediction is computed.
#   2a  (cap 300 s, min 150) the headline on a full card: four buffers_job jobs
#       (two memory-bound, two compute-bound, as the benchmark's micro) at 150%
#       and 200% of the data room, one at a time without msched (exclusive),
#       together under mschedd, and together under demand paging (um, its
#       passes capped); times, checksums, PCIe traffic (faults are not counted
#       on a GPU).
#   2b  (cap 180 s, min 90)  a pause another process can use: a 3 GiB decode
#       under mschedd paused, then a plain process cuMemAllocs 3 GiB; with
#       unified memory, then with VMM memory (PyTorch's expandable segments).
#   2c  (cap 150 s, min 75)  one switch on a full card: two decodes under mschedd.
#   3   (cap 270 s, min 120) traces: msched-profile --trace of llama.py 16 2048 8
#       and train.py 3 512, xz-compressed into bench/traces/, and the same
#       programs run plainly for the real figures beside a later replay.
#   4   (cap 200 s, min 45)  scripts/gpu-check.sh's mechanisms section
#       (um_mechanisms, no msched, no balloon).
# Each of 2a, 2b and 2c starts by filling the card with tests/gpu/balloon.cu
# (plain cuMemAlloc, not under msched) so that N GiB stay free, N = --data-gib
# (default 4) plus --ctx-mib (default 640) MiB for each process the step runs
# at once (their contexts), and frees it at its end.
#
# --budget-s (default 540): the seconds this call may take (a lent machine's
# call is 600 s at most); 20 s are kept for the report. --from STEP (1, 2, 2a,
# 2b, 2c, 3, 4) and --to STEP choose the steps. A second call goes on where
# the first stopped: give it the first call's archive with --resume (its
# report's parts join this call's, and --from defaults to the step after the
# last that ran). --export DIR (on a lent machine, $OUT) copies the report, the
# traces and the work folder as one archive (fullcard-work.tar.xz) there.
# Knobs: FULLCARD_TOKENS (step 1's tokens, 24), FULLCARD_JOB_S (2a: seconds of
# GPU work each job does alone, 2.5), FULLCARD_UM_PASSES (2a: about a
# memory-bound job's passes under um, 32; the other jobs' cut in the same
# ratio), FULLCARD_UM_CAP_S (2a: um's time limit, 75), FULLCARD_UM=off (2a:
# no um runs, the only ones whose managed memory exceeds what the card has
# free), FULLCARD_PAUSE_TOKENS (2b, 100),
# FULLCARD_PAIR_TOKENS (2c, 64), FULLCARD_UM_GIB (4: um_mechanisms' largest
# size, 16).
#
# Safety: the balloon is plain device memory, taken at the start of each of
# 2a-2c and freed at its end (and by the step's exit trap, by its own time
# limit, or when its parent dies); managed memory in all stays at or below 3N
# and 16 GiB (checked before each run that allocates it); every program runs
# under `timeout`; um's work is capped and reported as capped. Nothing changes
# the card's clocks, power, compute mode or MIG, and nothing resets it.
# Without a GPU it says so and exits 0.
set -u -o pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/scripts/gpu-common.sh"

steps=(1 2a 2b 2c 3 4)
declare -A title=([1]="1. The decode over its budget" [2a]="2a. The headline on a full card"
  [2b]="2b. A pause another process can use" [2c]="2c. One switch on a full card"
  [3]="3. Traces with host time" [4]="4. Unified-memory mechanisms")
declare -A cap_s=([1]=180 [2a]=300 [2b]=180 [2c]=150 [3]=270 [4]=200)
declare -A min_s=([1]=60 [2a]=150 [2b]=90 [2c]=75 [3]=120 [4]=45)
kMiB=1048576

usage() {
  echo "usage: scripts/gpu-fullcard.sh [--build DIR] [--budget-s S] [--from STEP] [--to STEP] [--data-gib G]" \
    "[--ctx-mib M] [--resume ARCHIVE] [--export DIR] [--work DIR] [--out FILE]   (STEP: 1 2 2a 2b 2c 3 4)" >&2
  exit 2
}
step_index() {  # step_index STEP: its place in $steps, or nothing
  local i
  for i in "${!steps[@]}"; do [ "${steps[$i]}" = "$1" ] && echo "$i"; done
}

build=$repo/build
budget=540
from=
to=4
data_gib=4
ctx_mib=640
resume=
export_dir=
work=
out=
run_step=
while [ $# -gt 0 ]; do
  case $1 in
    --build | --budget-s | --from | --to | --data-gib | --ctx-mib | --resume | --export | --work | --out | --run-step)
      [ $# -ge 2 ] || { echo "gpu-fullcard: $1 needs a value" >&2; usage; } ;;
    *) usage ;;
  esac
  case $1 in
    --build) build=$2 ;;
    --budget-s) budget=$2 ;;
    --from) from=$2 ;;
    --to) to=$2 ;;
    --data-gib) data_gib=$2 ;;
    --ctx-mib) ctx_mib=$2 ;;
    --resume) resume=$2 ;;
    --export) export_dir=$2 ;;
    --work) work=$2 ;;
    --out) out=$2 ;;
    --run-step) run_step=$2 ;;  # internal: one step, in its own process (the loop below)
    *) usage ;;
  esac
  shift 2
done
for n in "$budget" "$data_gib" "$ctx_mib"; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "gpu-fullcard: '$n' is not a whole number (--budget-s, --data-gib, --ctx-mib)" >&2; exit 2; }
done
{ [ "$data_gib" -ge 1 ] && [ "$data_gib" -le 5 ]; } || { echo "gpu-fullcard: --data-gib takes 1 to 5 (managed memory stays at or below 16 GiB)" >&2; exit 2; }
[ "$from" = 2 ] && from=2a
[ "$to" = 2 ] && to=2c
for s in ${from:+"$from"} "$to"; do
  [ -n "$(step_index "$s")" ] || { echo "gpu-fullcard: no step '$s' (steps: 1 2 2a 2b 2c 3 4)" >&2; exit 2; }
done
[ -z "$resume" ] || [ -f "$resume" ] || { echo "gpu-fullcard: --resume $resume: no such file" >&2; exit 2; }

if ! gpu_present; then
  echo "gpu-fullcard: no NVIDIA GPU here (nvidia-smi finds none); nothing to measure. The simulator's tests cover the rest."
  exit 0
fi

# ---------------------------------------------------------------------------
# Helpers of the steps (each step runs in its own process: --run-step).

report() { echo "$*" >>"$frag"; }
left() { echo $((step_deadline - $(date +%s))); }
# lim WANT: WANT seconds, or what is left of the step if less (at least 1).
lim() { local l; l=$(left); [ "$l" -lt "$1" ] && set -- "$l"; [ "$1" -lt 1 ] && set -- 1; echo "$1"; }
smi() { timeout --foreground -k 2 20 nvidia-smi "$@"; }
used_mib() { smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | head -1 | tr -d ' '; }
free_mib() { smi --query-gpu=memory.free --format=csv,noheader,nounits -i 0 | head -1 | tr -d ' '; }
py() { timeout --foreground -k 2 60 python3 "$@"; }
# field KEY PATTERN FILE: KEY's value on the first line of FILE matching PATTERN (KEY=VALUE fields).
field() { grep -- "$2" "$3" 2>/dev/null | head -1 | tr ' ' '\n' | sed -n "s/^$1=//p" | head -1; }
mib_of() { [ -n "$1" ] && echo $(($1 / kMiB)); }
# run NAME LIMIT MODE CMD...: CMD under `timeout LIMIT`, without libmsched (none)
# or with it in MODE (no coordinator unless MSCHED_COORD says), its output in
# $logs/NAME.out, statistics in NAME.stats.json, exit status in NAME.rc, wall
# seconds in NAME.wall (and $wall).
run() {
  local name=$1 limit=$2 mode=$3 start end rc
  shift 3
  start=$(date +%s.%N)
  if [ "$mode" = none ]; then
    env -u LD_PRELOAD timeout --foreground -k 5 "$limit" "$@" >"$logs/$name.out" 2>&1
  else
    LD_PRELOAD=$lib MSCHED_MODE=$mode MSCHED_LOG_LEVEL=warn MSCHED_STATS=$logs/$name.stats.json MSCHED_LOG=$logs/$name.log \
      MSCHED_COORD=${MSCHED_COORD:-off} timeout --foreground -k 5 "$limit" "$@" >"$logs/$name.out" 2>&1
  fi
  rc=$?
  end=$(date +%s.%N)
  wall=$(seconds_between "$start" "$end")
  echo "$rc" >"$logs/$name.rc"
  echo "$wall" >"$logs/$name.wall"
  return "$rc"
}
rc_of() { cat "$logs/$1.rc" 2>/dev/null || echo "?"; }
wall_of() { cat "$logs/$1.wall" 2>/dev/null || echo "?"; }
exit_note() {  # exit_note NAME: "" for exit 0, else what the exit says
  local rc
  rc=$(rc_of "$1")
  case $rc in
    0) ;;
    124 | 137) echo " (killed by its time limit)" ;;
    *) echo " (exit $rc)" ;;
  esac
}
stats() { py "$repo/tests/gpu/summarize_stats.py" "$logs/$1.stats.json" "${@:2}" | tr '\n' ' '; }
checksum() { sed -n 's/^checksum //p' "$logs/$1.out" 2>/dev/null | head -1; }
tokens_of() { sed -n 's/.*"tokens_hash": "\([0-9a-f]*\)".*/\1/p' "$logs/$1.out" 2>/dev/null | head -1; }
token_ms() { sed -n 's/.*"token_ms_median": \([0-9.]*\).*/\1/p' "$logs/$1.out" 2>/dev/null | head -1 | xargs -r printf '%.1f' 2>/dev/null; }
prefill_ms() { sed -n 's/.*"prefill_ms": \([0-9.]*\).*/\1/p' "$logs/$1.out" 2>/dev/null | head -1 | xargs -r printf '%.1f' 2>/dev/null; }
same_tokens() {  # same_tokens NAME REF
  local t
  t=$(tokens_of "$1")
  if [ -n "$t" ] && [ "$t" = "$2" ]; then echo "same ($t)"; else echo "DIFFER (${t:-none}$(exit_note "$1"))"; fi
}
tail_block() { report '```'; tail -"${2:-8}" "$logs/$1" >>"$frag" 2>/dev/null; report '```'; }

# The balloon: balloon_up PROCESSES leaves data_gib GiB plus PROCESSES x
# ctx_mib MiB free (N) and says so; balloon_down frees it.
# await_line PATTERN FILE PID TRIES PAUSE: until FILE has a line matching
# PATTERN, PID is gone, or TRIES looks PAUSE seconds apart have passed.
await_line() {
  local _
  for _ in $(seq "$4"); do
    grep -q "$1" "$2" 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || return 1
    sleep "$5"
  done
  return 1
}

balloon_up() {
  local procs=$1 head used0 used1 took freeb ctx_seen
  head=$((procs * ctx_mib))
  n_mib=$((data_gib * 1024 + head))
  managed_cap_mib=$((3 * n_mib < 16384 ? 3 * n_mib : 16384))
  used0=$(used_mib)
  env -u LD_PRELOAD timeout --foreground -k 5 "$(lim "$FC_LIMIT")" "$bin/balloon" hold "$data_gib" "$head" "$(lim "$FC_LIMIT")" \
    </dev/null >"$logs/$step-balloon.out" 2>&1 &
  balloon_pid=$!
  await_line '^balloon: holding took' "$logs/$step-balloon.out" "$balloon_pid" 300 0.2
  if ! grep -q '^balloon: holding took' "$logs/$step-balloon.out" 2>/dev/null; then
    report "The balloon did not take the card, so this step did not run:"
    tail_block "$step-balloon.out"
    balloon_down
    return 1
  fi
  took=$(field took_bytes '^balloon: holding' "$logs/$step-balloon.out")
  freeb=$(field free_bytes '^balloon: holding' "$logs/$step-balloon.out")
  used1=$(used_mib)
  ctx_seen=$((used1 - used0 - took / kMiB))
  report "The balloon (\`tests/gpu/balloon.cu\`, plain \`cuMemAlloc\`, not under msched) took $(mib_of "$took") MiB and left $(mib_of "$freeb") MiB free (its \`cuMemGetInfo\`): N = $data_gib GiB + $procs x $ctx_mib MiB for contexts = $n_mib MiB. nvidia-smi's used memory went from $used0 to $used1 MiB, so the balloon's own context took about $ctx_seen MiB$([ "$ctx_seen" -gt "$ctx_mib" ] && echo " (more than the $ctx_mib MiB allowed for each context: the jobs have less room than N says)"). Managed memory in this step stays at or below $managed_cap_mib MiB (3N and 16 GiB)."
  report ""
}
balloon_down() {
  [ -n "${balloon_pid:-}" ] || return 0
  kill -TERM "$balloon_pid" 2>/dev/null
  wait "$balloon_pid" 2>/dev/null
  balloon_pid=
  report ""
  report "Balloon freed ($(grep -h '^balloon: released' "$logs/$step-balloon.out" | head -1 | sed 's/^balloon: //')); nvidia-smi: $(used_mib) MiB used."
}
managed_ok() {  # managed_ok MIB WHAT: refuses a run whose managed memory would pass the cap
  [ "$1" -le "$managed_cap_mib" ] && return 0
  report "Not run: $2 would hold $1 MiB of managed memory, over this step's cap of $managed_cap_mib MiB."
  return 1
}

# mschedd for GPU 0, under the step's time limit (pid in $dpid).
start_mschedd() {  # start_mschedd NAME ARGS...
  local name=$1
  shift
  env -u LD_PRELOAD timeout --foreground -k 5 "$(lim "$FC_LIMIT")" "$mschedd_bin" --gpu 0 "$@" \
    --log "$logs/$name-mschedd.log" --trace "$logs/$name-trace.json" &
  dpid=$!
  wait_for_socket "$MSCHED_SOCKET_DIR/gpu0.sock" || echo "gpu-fullcard: mschedd did not open its socket" >&2
}
stop_mschedd() { [ -n "${dpid:-}" ] && { kill -TERM "$dpid" 2>/dev/null; wait "$dpid" 2>/dev/null; }; dpid=; }
# msched_job NAME LIMIT MEM CMD...: a job under GPU 0's mschedd, in the background (pid in $jpid).
msched_job() {
  local name=$1 limit=$2 mem=$3
  shift 3
  env -u LD_PRELOAD MSCHED_STATS="$logs/$name.stats.json" MSCHED_LOG="$logs/$name.log" MSCHED_LOG_LEVEL=info \
    MSCHED_COORD=required timeout --foreground -k 5 "$limit" "$msched" run --gpu 0 --mem "$mem" --name "$name" -- "$@" \
    >"$logs/$name.out" 2>&1 &
  jpid=$!
  bg_pids+=("$jpid")
}
finish() { wait "$1"; echo $? >"$logs/$2.rc"; }
# job_fields NAME FIELD...: the FIELDs of the job named NAME from one msched status --json.
job_fields() {
  timeout --foreground -k 2 15 "$msched" status --gpu 0 --json 2>/dev/null | py -c '
import json, sys
try:
    jobs = json.load(sys.stdin)["jobs"]
except (ValueError, KeyError):
    sys.exit(0)
for j in jobs:
    if j.get("name") == sys.argv[1]:
        print(*(j.get(f, "") for f in sys.argv[2:]))
        break' "$@"
}
# PCIe traffic while a run goes on, from nvidia-smi dmon's 1 s samples (MB/s).
dmon_start() { timeout --foreground -k 2 "$(lim "$FC_LIMIT")" nvidia-smi dmon -i 0 -s t -d 1 >"$logs/$1.dmon" 2>&1 & dmon_pid=$!; }
dmon_stop() { [ -n "${dmon_pid:-}" ] && { kill -TERM "$dmon_pid" 2>/dev/null; wait "$dmon_pid" 2>/dev/null; }; dmon_pid=; }
pcie() {
  awk '!/^#/ && NF >= 3 && $2 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/ { rx += $2; tx += $3; n++ }
       END { if (n) printf "%.1f GB in, %.1f GB out", rx / 1000, tx / 1000; else printf "n/a" }' "$logs/$1.dmon" 2>/dev/null
}
# The step's exit (its EXIT trap): every process it started is stopped, the balloon last.
# shellcheck disable=SC2317
cleanup() {
  local p
  for p in ${bg_pids[@]+"${bg_pids[@]}"} ${probe_pid:-} ${dmon_pid:-} ${sampler_pid:-}; do kill -TERM "$p" 2>/dev/null; done
  stop_mschedd
  for p in ${bg_pids[@]+"${bg_pids[@]}"} ${probe_pid:-} ${sampler_pid:-}; do wait "$p" 2>/dev/null; done
  dmon_stop
  balloon_down
  rm -rf "${MSCHED_SOCKET_DIR:-/nonexistent}"
}

# ---------------------------------------------------------------------------
# The steps.

step_1() {
  local tokens=${FULLCARD_TOKENS:-24} ref r m base
  local decode=(python3 "$repo/tests/gpu/llama.py" 16 2048 "$tokens")
  report "\`tests/gpu/llama.py 16 2048 $tokens\` (transformers LlamaForCausalLM, random fp16 weights, 2.2 GB; $tokens forward passes, the first the prefill of 32 tokens; median over tokens 3-$tokens) without libmsched, in msched mode without a budget, and in msched mode under \`MSCHED_GPU_MEMORY=1536MiB\` (1.5 GiB), no coordinator, the shipped templates, on the whole card. Target: the budgeted median at most 1.3x the unbudgeted."
  report ""
  timeout --foreground 120 python3 -c 'import torch, transformers' >/dev/null 2>&1
  run 1-none "$(lim 120)" none "${decode[@]}"
  run 1-msched "$(lim 120)" msched "${decode[@]}"
  MSCHED_GPU_MEMORY=1536MiB run 1-budget "$(lim 240)" msched "${decode[@]}"
  ref=$(tokens_of 1-none)
  base=$(token_ms 1-msched)
  report "| run | wall s | median ms a token | prefill ms | x msched unbudgeted | tokens |"
  report "|---|---:|---:|---:|---:|---|"
  for r in none msched budget; do
    m=$(token_ms "1-$r")
    report "| $r$(exit_note "1-$r") | $(wall_of "1-$r") | ${m:-} | $(prefill_ms "1-$r") | $([ -n "$m" ] && [ -n "$base" ] && py -c "print(f'{$m / $base:.2f}x')") | $(if [ "$r" = none ]; then echo "reference (${ref:-none})"; else same_tokens "1-$r" "$ref"; fi) |"
  done
  m=$(token_ms 1-budget)
  report ""
  if [ -n "$m" ] && [ -n "$base" ]; then
    report "Target (budgeted at most 1.3x unbudgeted): $(py -c "print('met' if $m <= 1.3 * $base else 'MISSED')") ($(py -c "print(f'{$m / $base:.2f}x')"))."
  else
    report "Target: not measured (a run gave no median)."
  fi
  report ""
  report "The budgeted run's counters, in all and a pass ($tokens passes; in = bytes.prefetched, out = bytes.evicted, dropped = read-mostly copies dropped, where this build counts them):"
  report ""
  py - "$logs/1-budget.stats.json" "$tokens" >>"$frag" <<'EOF'
import json, sys
try:
    doc = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print(f"(no statistics: {e})")
    sys.exit(0)
passes = int(sys.argv[2])
flat = {}
def walk(prefix, v):
    if isinstance(v, dict):
        for k, x in v.items():
            walk(f"{prefix}.{k}" if prefix else k, x)
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        flat[prefix] = v
walk("", doc)
print("| counter | in all | a pass |")
print("|---|---:|---:|")
for name in sorted(n for n in flat if n.startswith(("bytes.", "memory."))):
    v = flat[name]
    print(f"| {name} | {v / 1e9:.3f} GB | {v / passes / 1e9:.3f} GB |" if name.startswith("bytes.") else f"| {name} | {v / 1e9:.3f} GB | |")
drop = [n for n in flat if n.startswith("bytes.") and ("drop" in n or "discard" in n)]
def gb(n):
    return f"{flat[n] / passes / 1e9:.3f} GB" if n in flat else "not counted"
print()
print(f"A pass: {gb('bytes.prefetched')} in, {gb('bytes.evicted')} out, "
      + (", ".join(f"{gb(n)} {n}" for n in drop) if drop else "dropped not counted by this build") + ".")
EOF
  report ""
  report "Counters of the unbudgeted msched run: $(stats 1-msched bytes. launches. errors.)"
  report ""
  report "**The simulator's prediction** for the same run is computed after this run, without a GPU, by replaying the H200 trace of this decode on the h200-measured profile under the same budget (\`docs/simulator.md\`, \"Replaying a real program's trace\"), from a build of the same commit:"
  report ""
  report '```'
  report "xz -dk bench/traces/llama-16x2048-t2.trace.xz"
  report "LD_LIBRARY_PATH=build/sim/lib LD_PRELOAD=build/hook/libmsched.so MSIM_PROFILE=h200-measured MSIM_DEVICE= \\"
  report "  MSCHED_MODE=msched MSCHED_COORD=off MSCHED_GPU_MEMORY=1.5GiB MSCHED_STATS=/tmp/llama-t2-replay.stats.json \\"
  report "  build/sim/msim-run --replay bench/traces/llama-16x2048-t2.trace --json /tmp/llama-t2-replay.json"
  report '```'
  report ""
  report "(the trace holds the prefill and 2 tokens: its last pass is the one to set beside the median above, its bytes.* counters over 3 passes beside the table; step 3's 8-token trace, replayed the same way, gives a steadier figure)."
  for r in none msched budget; do
    [ "$(rc_of "1-$r")" = 0 ] || { report ""; report "1-$r output:"; tail_block "1-$r.out"; }
  done
}

# One run of four buffers_job jobs: names and arguments in $jobs/$args.
jobs=(mem-1 mem-2 cmp-1 cmp-2)
job_args() {  # job_args JOB NBUF PASSES_MEM PASSES_CMP
  case $1 in
    mem-*) echo "work $2 128 $3 4" ;;
    cmp-*) echo "work $2 128 $4 256" ;;
  esac
}
gpu_seconds() { sed -n 's/^footprint .* passes, \([0-9.]*\) s$/\1/p' "$logs/$1.out" 2>/dev/null | head -1; }
sums_match() {  # sums_match PREFIX REFPREFIX: each job's checksum against the reference's
  local j s r bad=0 none=0
  for j in "${jobs[@]}"; do
    s=$(checksum "$1-$j")
    r=$(checksum "$2-$j")
    [ -z "$s" ] && none=$((none + 1))
    [ -n "$s" ] && [ "$s" != "$r" ] && bad=$((bad + 1))
  done
  if [ "$none" -gt 0 ]; then echo "$none of 4 gave none"; elif [ "$bad" -gt 0 ]; then echo "$bad of 4 DIFFER"; else echo "all 4 the same"; fi
}
sequential() {  # sequential PREFIX NBUF PM PC LIMIT: the four jobs one after the other, plain; sets $seq_wall
  local j t0 t1
  t0=$(date +%s.%N)
  for j in "${jobs[@]}"; do
    # shellcheck disable=SC2046
    run "$1-$j" "$(lim "$5")" none "$bin/buffers_job" $(job_args "$j" "$2" "$3" "$4")
  done
  t1=$(date +%s.%N)
  seq_wall=$(seconds_between "$t0" "$t1")
}

step_2a() {
  local D=$((data_gib * 1024)) job_s=${FULLCARD_JOB_S:-2.5} um_passes=${FULLCARD_UM_PASSES:-32} um_cap=${FULLCARD_UM_CAP_S:-75}
  local pct job_mib nbuf pm pc f pum puc t0 t1 t_excl t_msched t_um t_excl_cap j mem_pp cmp_pp p ul rcf g_um done_um fe g_ex
  report "Four \`buffers_job work\` jobs, as the benchmark's micro: two memory-bound (4 integer rounds a word) and two compute-bound (256 rounds), each a quarter of the footprint in 128 MiB buffers, the footprint 150% and 200% of the $data_gib GiB the balloon leaves for data (N less the contexts), with their passes set so that each job does about $job_s s of GPU work alone. exclusive: one at a time without libmsched (plain device memory); msched: all four at once, \`msched run --mem\` under \`mschedd --gpu-memory ${D}MiB\`; um: all four at once under demand paging (\`MSCHED_MODE=um\`, every allocation managed, no prefetch), each job's passes cut to the same share of its work (a memory-bound job's to about $um_passes, a compute-bound job's in the same ratio, one at least) and the run limited to $um_cap s: its figure is CAPPED, set beside exclusive at the same passes; msched x um extrapolates it to the full work (um's makespan with its longest job's own GPU time, \`buffers_job\`'s figure, scaled to the whole work: an estimate). x exclusive is exclusive's makespan over msched's, x um um's over msched's (the benchmark's ratios: above 1, msched is faster). Faults are not counted on a GPU (only CUPTI sees them); PCIe traffic is nvidia-smi dmon's, in 1 s samples."
  report ""
  balloon_up 4 || return 1
  run 2a-cal-mem "$(lim 60)" none "$bin/buffers_job" work 8 128 40 4
  run 2a-cal-cmp "$(lim 60)" none "$bin/buffers_job" work 8 128 8 256
  mem_pp=$(gpu_seconds 2a-cal-mem)
  cmp_pp=$(gpu_seconds 2a-cal-cmp)
  if [ -z "$mem_pp" ] || [ -z "$cmp_pp" ]; then
    report "Calibration failed:"
    tail_block 2a-cal-mem.out
    tail_block 2a-cal-cmp.out
    return 1
  fi
  mem_pp=$(py -c "print($mem_pp / 40)")  # seconds a pass over 1 GiB
  cmp_pp=$(py -c "print($cmp_pp / 8)")
  report "Calibration (1 GiB alone, plain): a pass takes $(py -c "print(f'{$mem_pp * 1e3:.2f}')") ms memory-bound, $(py -c "print(f'{$cmp_pp * 1e3:.1f}')") ms compute-bound."
  report ""
  report "| footprint | run | makespan s | passes (memory-bound, compute-bound) | checksums | PCIe (dmon) |"
  report "|---|---|---:|---|---|---|"
  for pct in 150 200; do
    if [ "$(left)" -lt 60 ]; then
      report "| $pct% | not run: $(left) s left in the step | | | | |"
      continue
    fi
    t_msched=
    t_um=
    t_excl_cap=
    job_mib=$((D * pct / 100 / 4))
    nbuf=$((job_mib / 128))
    while [ $((4 * nbuf * 128)) -gt "$managed_cap_mib" ]; do nbuf=$((nbuf - 1)); done
    job_mib=$((nbuf * 128))
    pm=$(py -c "print(max(8, min(100000, round($job_s / ($mem_pp * $job_mib / 1024)))))")
    pc=$(py -c "print(max(2, min(10000, round($job_s / ($cmp_pp * $job_mib / 1024)))))")
    # um's share of the work: a memory-bound job's passes cut to about
    # um_passes, a compute-bound job's in the same ratio (one at least).
    puc=$(py -c "print(max(1, round($pc * min(1.0, $um_passes / $pm))))")
    f=$(py -c "print($puc / $pc)")
    pum=$(py -c "print(max(1, round($pm * $f)))")
    fe=$(py -c "print(($pum / $pm + $puc / $pc) / 2)")  # the share of the work um does
    g_um=
    done_um=0
    echo "gpu-fullcard: 2a at $pct%: 4 x $job_mib MiB, passes $pm/$pc (um $pum/$puc)" >&2
    # exclusive
    sequential "2a-$pct-excl" "$nbuf" "$pm" "$pc" 60
    t_excl=$seq_wall
    report "| $pct% ($((4 * job_mib)) MiB) | exclusive (one at a time, no msched) | $t_excl | $pm, $pc | reference$(for j in "${jobs[@]}"; do exit_note "2a-$pct-excl-$j"; done) | |"
    # msched
    if [ "$(left)" -ge 30 ]; then
      start_mschedd "2a-$pct" --gpu-memory "${D}MiB"
      dmon_start "2a-$pct-msched"
      t0=$(date +%s.%N)
      p=()
      for j in "${jobs[@]}"; do
        # shellcheck disable=SC2046
        msched_job "2a-$pct-msched-$j" "$(lim 120)" "${job_mib}MiB" "$bin/buffers_job" $(job_args "$j" "$nbuf" "$pm" "$pc")
        p+=("$jpid")
      done
      for j in 0 1 2 3; do finish "${p[$j]}" "2a-$pct-msched-${jobs[$j]}"; done
      t1=$(date +%s.%N)
      t_msched=$(seconds_between "$t0" "$t1")
      dmon_stop
      timeout --foreground -k 2 15 "$msched" status --gpu 0 >"$logs/2a-$pct-status.out" 2>&1
      stop_mschedd
      report "| | msched (4 at once under mschedd) | $t_msched | $pm, $pc | $(sums_match "2a-$pct-msched" "2a-$pct-excl")$(for j in "${jobs[@]}"; do exit_note "2a-$pct-msched-$j"; done) | $(pcie "2a-$pct-msched") |"
    else
      report "| | msched: not run ($(left) s left) | | | | |"
    fi
    # um, capped
    ul=$(lim "$um_cap")
    if [ "${FULLCARD_UM:-on}" = off ]; then
      report "| | um: not run (FULLCARD_UM=off) | | | | |"
    elif [ "$ul" -ge 20 ] && managed_ok $((4 * job_mib)) "um at $pct%"; then
      dmon_start "2a-$pct-um"
      t0=$(date +%s.%N)
      p=()
      for j in "${jobs[@]}"; do
        # shellcheck disable=SC2046
        run "2a-$pct-um-$j" "$ul" um "$bin/buffers_job" $(job_args "$j" "$nbuf" "$pum" "$puc") &
        p+=($!)
        bg_pids+=($!)
      done
      for j in 0 1 2 3; do wait "${p[$j]}"; done
      t1=$(date +%s.%N)
      t_um=$(seconds_between "$t0" "$t1")
      dmon_stop
      g_um=$(for j in "${jobs[@]}"; do gpu_seconds "2a-$pct-um-$j"; done | sort -g | tail -1)
      [ "$(cat "$logs"/2a-"$pct"-um-*.rc | sort -u)" = 0 ] && done_um=1
      if [ "$pum" = "$pm" ] && [ "$puc" = "$pc" ]; then
        t_excl_cap=$t_excl
        report "| | um (4 at once, demand paging; not capped) | $t_um | $pum, $puc | $(sums_match "2a-$pct-um" "2a-$pct-excl")$(for j in "${jobs[@]}"; do exit_note "2a-$pct-um-$j"; done) | $(pcie "2a-$pct-um") |"
      else
        sequential "2a-$pct-exclcap" "$nbuf" "$pum" "$puc" 30
        t_excl_cap=$seq_wall
        report "| | um (4 at once, demand paging), CAPPED to $(py -c "print(f'{$fe:.3g}')") of the work | $t_um | $pum, $puc | $(sums_match "2a-$pct-um" "2a-$pct-exclcap")$(for j in "${jobs[@]}"; do exit_note "2a-$pct-um-$j"; done) (against exclusive at these passes) | $(pcie "2a-$pct-um") |"
        report "| | exclusive at um's capped passes | $t_excl_cap | $pum, $puc | reference for um | |"
      fi
      if grep -qx '12[47]' "$logs"/2a-"$pct"-um-*.rc 2>/dev/null; then
        report "| | (um was stopped by its $ul s limit: its makespan is a lower bound) | | | | |"
      fi
    else
      report "| | um: not run ($(left) s left in the step) | | | | |"
    fi
    g_ex=-
    [ -n "$t_excl_cap" ] && g_ex=$(for j in "${jobs[@]}"; do gpu_seconds "2a-$pct-$([ "$t_excl_cap" = "$t_excl" ] && echo excl || echo exclcap)-$j"; done | py -c 'import sys; v = [float(x) for x in sys.stdin.read().split()]; print(f"{sum(v):.2f}" if len(v) == 4 else "-")')
    echo "$pct $t_excl ${t_msched:--} ${t_um:--} $fe ${t_excl_cap:--} ${g_um:--} $done_um $g_ex" >>"$logs/2a-headline.txt"
  done
  report ""
  report "Headline (the real x um and x exclusive):"
  report ""
  report "| footprint | exclusive s | msched s | msched x exclusive | um s, capped (share of the work) | exclusive s at um's passes | um over exclusive there: makespans; GPU time (um's longest job, exclusive's four summed) | um s extrapolated | msched x um (estimate) |"
  report "|---|---:|---:|---:|---:|---:|---|---:|---:|"
  while read -r pct t_excl t_msched t_um fe t_excl_cap g_um done_um g_ex; do
    local x_ex='' x_um='' um_full='' over=''
    [ "$t_msched" != - ] && x_ex=$(py -c "print(f'{$t_excl / $t_msched:.2f}x')")
    [ "$t_um" != - ] && [ "$t_excl_cap" != - ] && over=$(py -c "print(f'{$t_um / $t_excl_cap:.1f}x')")
    [ -n "$over" ] && [ "$g_um" != - ] && [ "$g_ex" != - ] && over="$over; $(py -c "print(f'{$g_um / $g_ex:.1f}x ({$g_um:.2f} s against {$g_ex:.2f} s)')")"
    if [ "$t_um" != - ] && [ "$g_um" != - ] && [ "$done_um" = 1 ]; then
      um_full=$(py -c "print(f'{$t_um + $g_um * (1 / $fe - 1):.1f}')")
      [ "$t_msched" != - ] && x_um=$(py -c "print(f'{$um_full / $t_msched:.2f}x')")
    elif [ "$t_um" != - ]; then
      um_full="n/a (um did not finish)"
    fi
    report "| $pct% | $t_excl | $([ "$t_msched" != - ] && echo "$t_msched") | $x_ex | $([ "$t_um" != - ] && echo "$t_um ($(py -c "print(f'{$fe:.3g}')"))") | $([ "$t_excl_cap" != - ] && echo "$t_excl_cap") | $over | $um_full | $x_um |"
  done <"$logs/2a-headline.txt"
  for pct in 150 200; do
    [ -f "$logs/2a-$pct-trace.json" ] || continue
    report ""
    report "What mschedd's switches moved at $pct% (its timeline):"
    report ""
    py "$repo/tests/gpu/summarize_swaps.py" "$logs/2a-$pct-trace.json" >>"$frag"
    report ""
    for j in "${jobs[@]}"; do report "- $j: $(stats "2a-$pct-msched-$j" coordinator. bytes. errors.)"; done
  done
  for rcf in "$logs"/2a-*.rc; do
    [ "$(cat "$rcf")" = 0 ] && continue
    report ""
    report "$(basename "$rcf" .rc) output:"
    tail_block "$(basename "$rcf" .rc).out" 6
  done
}

# One pause: the 3 GiB decode under mschedd, paused, a plain process's 3 GiB
# cuMemAlloc, resumed. pause_one KIND (um or vmm).
pause_one() {
  local kind=$1 name=hold-$1 conf='' a u u_idle pause_rc resume_rc p0 p1 q0 q1 r s smi_b smi_d smi_a outcome
  [ "$kind" = vmm ] && conf=expandable_segments:True
  start_mschedd "2b-$kind" --gpu-memory "$((data_gib * 1024))MiB"
  u_idle=$(used_mib)
  PYTORCH_CUDA_ALLOC_CONF=$conf msched_job "$name" "$(lim 150)" 3600MiB "${decode[@]}"
  for _ in $(seq 400); do
    a=$(job_fields "$name" allocated_bytes)
    [ -n "$a" ] && [ "$a" -ge 2900000000 ] && break
    u=$(used_mib)
    [ $((u - u_idle)) -ge 2800 ] && break
    kill -0 "$jpid" 2>/dev/null || break
    sleep 0.25
  done
  sleep 3
  report "| moment | job's resident bytes (msched status) | job's state | nvidia-smi used / free MiB | cuMemGetInfo free MiB (the probe's) |"
  report "|---|---:|---|---|---:|"
  read -r r s < <(job_fields "$name" resident_bytes run_state)
  report "| decoding, before the pause | ${r:-} | ${s:-} | $(used_mib) / $(free_mib) | |"
  p0=$(date +%s.%N)
  timeout --foreground -k 2 90 "$msched" pause --gpu 0 --timeout 60s "$name" >"$logs/2b-$kind-pause.out" 2>&1
  pause_rc=$?
  p1=$(date +%s.%N)
  read -r r s < <(job_fields "$name" resident_bytes run_state)
  report "| \`msched pause\` returned (exit $pause_rc, $(seconds_between "$p0" "$p1") s) | ${r:-} | ${s:-} | $(used_mib) / $(free_mib) | |"
  smi_b="$(used_mib) / $(free_mib)"
  env -u LD_PRELOAD timeout --foreground -k 5 "$(lim 90)" "$bin/balloon" probe "$probe_mib" hold 60 </dev/null \
    >"$logs/2b-$kind-probe.out" 2>&1 &
  probe_pid=$!
  await_line '^probe: holding\|^probe: alloc failed' "$logs/2b-$kind-probe.out" "$probe_pid" 600 0.1
  smi_d="$(used_mib) / $(free_mib)"
  kill -TERM "$probe_pid" 2>/dev/null
  wait "$probe_pid"
  echo $? >"$logs/2b-$kind-probe.rc"
  probe_pid=
  smi_a="$(used_mib) / $(free_mib)"
  report "| the probe's context made, before its \`cuMemAlloc\` | | | $smi_b | $(mib_of "$(field free_bytes '^probe: before' "$logs/2b-$kind-probe.out")") |"
  report "| the probe holding its $probe_mib MiB (or failed) | | | $smi_d | $(mib_of "$(field free_bytes '^probe: during' "$logs/2b-$kind-probe.out")") |"
  report "| the probe freed it | | | $smi_a | $(mib_of "$(field free_bytes '^probe: after' "$logs/2b-$kind-probe.out")") |"
  q0=$(date +%s.%N)
  timeout --foreground -k 2 90 "$msched" resume --gpu 0 --timeout 60s "$name" >"$logs/2b-$kind-resume.out" 2>&1
  resume_rc=$?
  q1=$(date +%s.%N)
  sleep 2
  read -r r s < <(job_fields "$name" resident_bytes run_state)
  report "| 2 s after \`msched resume\` returned (exit $resume_rc, $(seconds_between "$q0" "$q1") s) | ${r:-} | ${s:-} | $(used_mib) / $(free_mib) | |"
  finish "$jpid" "$name"
  stop_mschedd
  if grep -q '^probe: alloc ok' "$logs/2b-$kind-probe.out"; then
    outcome="**succeeded** in $(field ms '^probe: alloc ok' "$logs/2b-$kind-probe.out") ms (writing it once: $(field write_ms '^probe: alloc ok' "$logs/2b-$kind-probe.out") ms)"
  elif grep -q '^probe: alloc failed' "$logs/2b-$kind-probe.out"; then
    outcome="**failed** ($(field error '^probe: alloc failed' "$logs/2b-$kind-probe.out")) after $(field ms '^probe: alloc failed' "$logs/2b-$kind-probe.out") ms"
  else
    outcome="gave no answer (exit $(cat "$logs/2b-$kind-probe.rc"))"
  fi
  report ""
  report "The plain process's \`cuMemAlloc\` of $probe_mib MiB while the job was paused $outcome. Tokens after the resume: $(same_tokens "$name" "$ref_tokens")$(exit_note "$name"). pause said: \`$(tr '\n' ' ' <"$logs/2b-$kind-pause.out")\`; resume said: \`$(tr '\n' ' ' <"$logs/2b-$kind-resume.out")\`."
  report ""
  report "Job counters: $(stats "$name" allocations. bytes. coordinator. errors.)"
  [ "$(rc_of "$name")" = 0 ] || { report ""; report "$name output:"; tail_block "$name.out"; }
}

# reference_decode NAME CMD...: CMD without libmsched on the full card (the
# reference its tokens are compared with), after a warm-up import so that
# its time is the decode's, not Python's first import.
reference_decode() {
  local name=$1
  shift
  timeout --foreground 120 python3 -c 'import torch, transformers' >/dev/null 2>&1
  run "$name" "$(lim 90)" none "$@"
}

step_2b() {
  local tokens=${FULLCARD_PAUSE_TOKENS:-100} probe_mib=3072 kind ref_tokens
  local decode=(python3 "$repo/tests/gpu/llama.py" 24 2048 "$tokens")
  report "A job under msched that holds about 3 GiB: \`tests/gpu/llama.py 24 2048 $tokens\` (24 layers, 3.2 GB of fp16 weights), \`msched run --mem 3600MiB\` under \`mschedd --gpu-memory $((data_gib * 1024))MiB\`, paused 3 s into its decode. Then a plain process, not under msched (\`balloon probe $probe_mib hold\`), makes its context and \`cuMemAlloc\`s $probe_mib MiB, holds it while nvidia-smi is read, and frees it; the job is resumed and its tokens compared with a run without libmsched. Once with unified memory (msched makes PyTorch's \`cudaMalloc\` managed), once with VMM memory (\`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\`: \`cuMemCreate\`/\`cuMemMap\`, which msched passes through unless this build manages it)."
  report ""
  balloon_up 2 || return 1
  managed_ok 3600 "the paused job" || return 1
  reference_decode 2b-reference "${decode[@]}"
  ref_tokens=$(tokens_of 2b-reference)
  report "Reference without libmsched, on the full card: tokens ${ref_tokens:-none}$(exit_note 2b-reference), $(token_ms 2b-reference) ms a token, $(wall_of 2b-reference) s in all."
  [ -n "$ref_tokens" ] || tail_block 2b-reference.out
  for kind in um vmm; do
    report ""
    report "### $([ "$kind" = um ] && echo "Unified memory" || echo "VMM memory (expandable segments)")"
    report ""
    if [ "$(left)" -lt 45 ]; then
      report "Not run: $(left) s left in the step."
      continue
    fi
    pause_one "$kind"
  done
}

# Each swap in an mschedd timeline: when, whose, which way, bytes, time, rate.
swap_list() {
  py - "$1" <<'EOF'
import json, sys
try:
    text = open(sys.argv[1]).read().rstrip()
    events = json.loads(text if text.endswith("]") else text.rstrip(",") + "]")
except (OSError, ValueError) as e:
    print(f"(no timeline: {e})")
    sys.exit(0)
swaps = [e for e in events if e.get("ph") == "X" and e.get("name") in ("swap-in", "swap-out") and "job" in e.get("args", {})]
if not swaps:
    print("(no swaps in the timeline)")
    sys.exit(0)
t0 = min(e.get("ts", 0) for e in events if "ts" in e)
print("| at s | job | direction | bytes | ms | GB/s | note |")
print("|---:|---|---|---:|---:|---:|---|")
for e in sorted(swaps, key=lambda e: e["ts"]):
    a = e["args"]
    b = int(a.get("bytes", 0))
    dur = e.get("dur", 0) / 1e3
    rate = f"{b / 1e9 / (dur / 1e3):.1f}" if dur > 0 else ""
    note = "estimated" if a.get("estimated") else ("timeline's estimate" if e["name"] == "swap-out" else "")
    print(f"| {(e['ts'] - t0) / 1e6:.2f} | {a.get('name', a['job'])} | {e['name']} | {b / 1e6:,.1f} MB | {dur:.1f} | {rate} | {note} |")
EOF
}

step_2c() {
  local tokens=${FULLCARD_PAIR_TOKENS:-64} ref_tokens t0 t1 j peak
  local decode=(python3 "$repo/tests/gpu/llama.py" 16 2048 "$tokens")
  report "Two decodes (\`tests/gpu/llama.py 16 2048 $tokens\`, 2.34 GB allocated each) started together, \`msched run --mem 2400M\` each, under \`mschedd --gpu-memory $((data_gib * 1024))MiB\` on the card the balloon leaves, which cannot hold both: they are time-sliced, and each switch's evictions and loads contend for the real HBM. Against one such decode alone without libmsched."
  report ""
  balloon_up 2 || return 1
  managed_ok 4800 "the two decodes" || return 1
  reference_decode 2c-reference "${decode[@]}"
  ref_tokens=$(tokens_of 2c-reference)
  start_mschedd 2c --gpu-memory "$((data_gib * 1024))MiB"
  (while :; do used_mib; sleep 0.5; done) >"$logs/2c-used.txt" 2>/dev/null &
  sampler_pid=$!
  t0=$(date +%s.%N)
  msched_job 2c-pair-1 "$(lim 150)" 2400M "${decode[@]}"
  local p1=$jpid
  msched_job 2c-pair-2 "$(lim 150)" 2400M "${decode[@]}"
  finish "$p1" 2c-pair-1
  finish "$jpid" 2c-pair-2
  t1=$(date +%s.%N)
  kill -TERM "$sampler_pid" 2>/dev/null
  wait "$sampler_pid" 2>/dev/null
  sampler_pid=
  timeout --foreground -k 2 15 "$msched" status --gpu 0 >"$logs/2c-status.out" 2>&1
  stop_mschedd
  peak=$(sort -n "$logs/2c-used.txt" | tail -1)
  report "| run | wall s | median ms a token | tokens |"
  report "|---|---:|---:|---|"
  report "| one decode alone, no libmsched | $(wall_of 2c-reference) | $(token_ms 2c-reference) | reference (${ref_tokens:-none}$(exit_note 2c-reference)) |"
  report "| both at once under mschedd | $(seconds_between "$t0" "$t1") | $(token_ms 2c-pair-1), $(token_ms 2c-pair-2) | $(same_tokens 2c-pair-1 "$ref_tokens"); $(same_tokens 2c-pair-2 "$ref_tokens") |"
  report ""
  report "nvidia-smi's used memory peaked at ${peak:-?} MiB (sampled every 0.5 s) of $(smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | head -1) MiB."
  report ""
  report "Each switch (mschedd's timeline: a swap-in lasts as long as the job measured its loads; a swap-out's length is the timeline's estimate, its bytes the drop in what the job reported holding):"
  report ""
  swap_list "$logs/2c-trace.json" >>"$frag"
  report ""
  py "$repo/tests/gpu/summarize_swaps.py" "$logs/2c-trace.json" >>"$frag"
  report ""
  for j in 1 2; do report "- pair-$j: $(stats "2c-pair-$j" coordinator. bytes. allocations.)"; done
  for j in 1 2; do
    [ "$(rc_of "2c-pair-$j")" = 0 ] || { report ""; report "2c-pair-$j output:"; tail_block "2c-pair-$j.out"; }
  done
}

# What a trace holds: its records by type, its launches' fields, and any
# field beyond the format's (such as a host time).
trace_summary() {
  py - "$1" <<'EOF'
import json, sys
types, keys, base = {}, set(), {"type", "seq", "kernel", "params", "args", "grid", "block", "smem", "touched",
                                 "latency_ns", "duration_ns"}
header = {}
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    types[r.get("type")] = types.get(r.get("type"), 0) + 1
    if r.get("type") == "launch":
        keys.update(r)
    elif r.get("type") == "header":
        header = r
extra = sorted(keys - base)
print(", ".join(f"{n} {t}" for t, n in sorted(types.items(), key=lambda x: str(x[0]))) +
      f"; header {json.dumps({k: v for k, v in header.items() if k != 'type'})}; launch fields beyond the format's: " +
      (", ".join(extra) if extra else "none (no host time in this build's traces)"))
EOF
}
xz_file() { py -c 'import lzma, shutil, sys
with open(sys.argv[1], "rb") as i, lzma.open(sys.argv[2], "wb", preset=9) as o: shutil.copyfileobj(i, o)' "$1" "$2"; }

step_3() {
  local name cmd lim_s
  report "\`msched-profile --trace\` (CUPTI) of \`tests/gpu/llama.py 16 2048 8\` (8 tokens decoded) and \`tests/gpu/train.py 3 512\`, compressed into \`bench/traces/\` under this device's name; then the same programs without libmsched, for the real figures to set beside a replay."
  report ""
  mkdir -p "$work/traces"
  timeout --foreground 120 python3 -c 'import torch, transformers' >/dev/null 2>&1
  report "| trace | exit | recorded in s | file | what it holds |"
  report "|---|---:|---:|---|---|"
  for name in llama-16x2048-t8 train-w512-s3; do
    case $name in
      llama-*) cmd=(python3 "$repo/tests/gpu/llama.py" 16 2048 8) lim_s=150 ;;
      train-*) cmd=(python3 "$repo/tests/gpu/train.py" 3 512) lim_s=90 ;;
    esac
    if [ "$(left)" -lt 30 ]; then
      report "| $name | not run: $(left) s left | | | |"
      continue
    fi
    rm -f "$work/traces/$name.trace" "$work/traces/$name.trace".*
    run "3-trace-$name" "$(lim "$lim_s")" none "$profiler" --trace "$work/traces/$name.trace" \
      -o "$logs/$name.templates.json" --report "$logs/$name-profile.md" -- "${cmd[@]}"
    if [ -s "$work/traces/$name.trace" ]; then
      xz_file "$work/traces/$name.trace" "$work/traces/$name-$slug.trace.xz"
      cp "$work/traces/$name-$slug.trace.xz" "$repo/bench/traces/" 2>/dev/null
      report "| $name | $(rc_of "3-trace-$name") | $(wall_of "3-trace-$name") | \`bench/traces/$name-$slug.trace.xz\` ($(($(stat -c %s "$work/traces/$name-$slug.trace.xz") / 1024)) KiB) | $(trace_summary "$work/traces/$name.trace") |"
    else
      report "| $name | $(rc_of "3-trace-$name") | $(wall_of "3-trace-$name") | none | |"
      tail_block "3-trace-$name.out"
    fi
  done
  report ""
  report "The real runs, without libmsched:"
  report ""
  if [ "$(left)" -ge 20 ]; then
    run 3-real-llama "$(lim 60)" none python3 "$repo/tests/gpu/llama.py" 16 2048 8
    report "- llama.py 16 2048 8: exit $(rc_of 3-real-llama), $(wall_of 3-real-llama) s; prefill $(prefill_ms 3-real-llama) ms, median token $(token_ms 3-real-llama) ms (tokens 3-8): \`$(grep '^{' "$logs/3-real-llama.out" | head -1)\`"
  fi
  if [ "$(left)" -ge 15 ]; then
    run 3-real-train "$(lim 60)" none python3 "$repo/tests/gpu/train.py" 3 512
    report "- train.py 3 512: exit $(rc_of 3-real-train), $(wall_of 3-real-train) s; $(grep '^median' "$logs/3-real-train.out" | head -1)"
  fi
  report ""
  report "Afterwards, without the GPU: replay each trace on the h200-measured profile (\`xz -dk\`, then \`MSIM_PROFILE=h200-measured MSIM_DEVICE= LD_LIBRARY_PATH=build/sim/lib build/sim/msim-run --replay TRACE --json OUT.json\`), and set the replay beside these runs in \`bench/results/sim-vs-real.md\`; add the traces to \`bench/traces/README.md\`."
}

step_4() {
  local gib=${FULLCARD_UM_GIB:-16}
  report "\`tests/gpu/um_mechanisms $gib\` without msched and without the balloon (\`scripts/gpu-check.sh\`'s first section)."
  report ""
  if run 4-mechanisms "$(lim 200)" none "$bin/um_mechanisms" "$gib"; then
    cat "$logs/4-mechanisms.out" >>"$frag"
  else
    report "um_mechanisms failed (exit $(rc_of 4-mechanisms)); what it printed:"
    report ""
    cat "$logs/4-mechanisms.out" >>"$frag"
  fi
}

# ---------------------------------------------------------------------------
# One step, in its own process under the loop's `timeout`.
if [ -n "$run_step" ]; then
  step=$run_step
  work=$FC_WORK
  logs=$work/logs
  bin=$work/bin
  lib=$build/hook/libmsched.so
  msched=$build/tools/msched
  mschedd_bin=$build/tools/mschedd
  profiler=$build/tools/msched-profile
  gpu_facts
  step_deadline=$(($(date +%s) + FC_LIMIT - 10))
  frag=$work/report/$step.md
  : >"$frag"
  bg_pids=()
  balloon_pid=
  managed_cap_mib=16384
  MSCHED_SOCKET_DIR=$(mktemp -d /tmp/mfc-sock.XXXXXX)
  export MSCHED_SOCKET_DIR
  trap cleanup EXIT
  trap 'exit 143' TERM INT HUP
  report "## ${title[$step]}"
  report ""
  report "_Run on $device (driver $driver), $(date -u '+%Y-%m-%d %H:%M:%SZ'), in at most $FC_LIMIT s._"
  report ""
  case $step in
    1) step_1 ;;
    2a) step_2a ;;
    2b) step_2b ;;
    2c) step_2c ;;
    3) step_3 ;;
    4) step_4 ;;
  esac
  exit 0
fi

# ---------------------------------------------------------------------------
# The loop: the steps in order, each under its own timeout, within the budget.
t_start=$(date +%s)
deadline=$((t_start + budget))
for tool in nvcc python3 timeout; do
  command -v $tool >/dev/null 2>&1 || { echo "gpu-fullcard: $tool is needed on the GPU machine" >&2; exit 1; }
done
for f in tools/msched tools/mschedd tools/msched-profile hook/libmsched.so; do
  [ -e "$build/$f" ] || { echo "gpu-fullcard: $build/$f is missing; build msched or pass --build DIR" >&2; exit 1; }
done
build=$(cd "$build" && pwd)
gpu_facts
today=$(date +%Y-%m-%d)
work=${work:-$(mktemp -d /tmp/msched-gpu-fullcard.XXXXXX)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
if [ -n "$resume" ]; then
  python3 - "$resume" "$work" <<'EOF' || { echo "gpu-fullcard: cannot unpack $resume" >&2; exit 1; }
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    try:
        t.extractall(sys.argv[2], filter="data")
    except TypeError:
        t.extractall(sys.argv[2])
EOF
fi
mkdir -p "$work/bin" "$work/logs" "$work/report" "$work/traces"
[ -f "$work/meta" ] || echo "$today $slug" >"$work/meta"
read -r first_date first_slug <"$work/meta"
out=${out:-$repo/bench/results/gpu-$first_date-$first_slug-fullcard.md}
if [ -z "$from" ]; then
  from=1
  [ -n "$resume" ] && [ -f "$work/next-step" ] && from=$(cat "$work/next-step")
fi
if [ "$from" = "done" ]; then
  first=${#steps[@]}
else
  first=$(step_index "$from")
fi
last=$(step_index "$to")
call=1
[ -f "$work/calls.tsv" ] && call=$(($(wc -l <"$work/calls.tsv") + 1))

# The programs the chosen steps need, built for this GPU (kept across calls of
# the same architecture), while Python's first import of torch warms the disk cache.
need=()
for i in $(seq "$first" "$last"); do
  case ${steps[$i]} in
    2a) need+=(balloon buffers_job) ;;
    2b | 2c) need+=(balloon) ;;
    4) need+=(um_mechanisms) ;;
  esac
done
[ "$(cat "$work/bin/arch" 2>/dev/null)" = "$arch" ] || rm -f "$work/bin"/*
echo "$arch" >"$work/bin/arch"
pids=()
for name in $(printf '%s\n' ${need[@]+"${need[@]}"} | sort -u); do
  sum=$(sha256sum <"$repo/tests/gpu/$name.cu" | cut -d' ' -f1)
  [ -x "$work/bin/$name" ] && [ "$(cat "$work/bin/$name.src" 2>/dev/null)" = "$sum" ] && continue
  rm -f "$work/bin/$name"
  (timeout 300 nvcc -O2 -std=c++17 -arch=sm_"$arch" -o "$work/bin/$name" "$repo/tests/gpu/$name.cu" -lcuda &&
    echo "$sum" >"$work/bin/$name.src") \
    >"$work/logs/nvcc-$name.log" 2>&1 &
  pids+=($!)
done
timeout 120 python3 -c 'import torch, transformers' >/dev/null 2>&1 &
for p in ${pids[@]+"${pids[@]}"}; do wait "$p"; done
wait
for name in ${need[@]+"${need[@]}"}; do
  [ -x "$work/bin/$name" ] || { echo "gpu-fullcard: nvcc failed on tests/gpu/$name.cu ($work/logs/nvcc-$name.log)" >&2; exit 1; }
done

# The shipped templates: a build's libmsched looks for them in the source tree
# it was built from; a build carried from another machine names a folder that
# is not here, and then this tree's are given as MSCHED_TEMPLATES (the same files).
shipped=$(strings -n 8 "$build/hook/libmsched.so" 2>/dev/null | grep -m1 '/templates$')
templates_note="the shipped templates from $shipped"
if [ -z "$shipped" ] || [ ! -d "$shipped" ]; then
  export MSCHED_TEMPLATES=$repo/templates
  templates_note="the shipped templates from this tree's templates/, as MSCHED_TEMPLATES (the build looks in ${shipped:-a folder not found}, absent here)"
fi
echo "$call $templates_note" >>"$work/templates.txt"
export FC_WORK=$work FC_LIMIT
ran=()
next=${steps[$first]:-done}
stopped=
tpid=

# The report, every step's part from this call and the earlier ones; written
# (and exported) after every step, so that a call cut short still leaves it.
write_report() {
  local s c dev drv at did
  {
    echo "# msched on a full card: $device, $first_date"
    echo ""
    echo "Written by \`scripts/gpu-fullcard.sh\` (issue 58; commit $(timeout 20 git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)). $(timeout 20 nvidia-smi --query-gpu=memory.total --format=csv,noheader -i 0 | head -1) card; $torch_versions; CUDA compiler $(timeout 20 nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'); $(nproc) CPU cores. Each step says the card it ran on. Calls:"
    echo ""
    {
      cat "$work/calls.tsv" 2>/dev/null
      printf '%s\t%s\t%s\t%s\t%s\n' "$call" "$device" "$driver" "$(date -u -d "@$t_start" '+%Y-%m-%d %H:%M:%SZ')" "${ran[*]:-none}"
    } | while IFS=$'\t' read -r c dev drv at did; do
      echo "- call $c: $dev (driver $drv), from $at: steps $did; $(sed -n "s/^$c //p" "$work/templates.txt" | head -1)"
    done
    for s in "${steps[@]}"; do
      echo ""
      if [ -s "$work/report/$s.md" ]; then
        cat "$work/report/$s.md"
      else
        echo "## ${title[$s]}"
        echo ""
        if [ "$next" != "done" ] && [ "$(step_index "$s")" -ge "$(step_index "$next")" ]; then
          echo "Not run$([ "$stopped" = time ] && echo ": the time ran out") (a later call: \`--resume\` with this call's archive, \`--from $next\`)."
        else
          echo "Not run."
        fi
      fi
    done
  } >"$out.tmp" && mv "$out.tmp" "$out"
}
export_all() {
  [ -n "$export_dir" ] || return 0
  mkdir -p "$export_dir"
  cp "$out" "$export_dir/"
  cp "$work"/traces/*.trace.xz "$export_dir/" 2>/dev/null
  timeout 120 python3 - "$work" "$export_dir/fullcard-work.tar.xz" <<'EOF'
import os, sys, tarfile
work, dest = sys.argv[1], sys.argv[2]
def wanted(path):
    name = os.path.basename(path)
    if os.path.islink(path) or not os.path.isfile(path):
        return False
    return name.endswith(".xz") or ".trace" not in name  # raw traces travel compressed only
def build(skip_over):
    left_out = []
    with tarfile.open(dest + ".tmp", "w:xz") as t:
        for root, dirs, files in os.walk(work):
            for f in sorted(files):
                p = os.path.join(root, f)
                if not wanted(p):
                    continue
                if skip_over and os.path.getsize(p) > skip_over:
                    left_out.append(os.path.relpath(p, work))
                    continue
                t.add(p, arcname=os.path.relpath(p, work))
    os.replace(dest + ".tmp", dest)
    return left_out
left_out = build(0)
for cut in (4 << 20, 1 << 20, 256 << 10):
    if os.path.getsize(dest) <= 15 << 20:
        break
    left_out = build(cut)
print(f"gpu-fullcard: archived the work folder to {dest} ({os.path.getsize(dest) >> 10} KiB)"
      + (f"; left out: {', '.join(left_out)}" if left_out else ""))
EOF
}
# Stopped from outside (the lent machine's own limit): the step in flight goes,
# and what ran is written and exported.
# shellcheck disable=SC2317
on_signal() {
  [ -n "$tpid" ] && kill -TERM -- -"$tpid" 2>/dev/null
  echo "$next" >"$work/next-step"
  write_report
  printf '%s\t%s\t%s\t%s\t%s\n' "$call" "$device" "$driver" "$(date -u -d "@$t_start" '+%Y-%m-%d %H:%M:%SZ')" \
    "${ran[*]:-none} (stopped from outside in $next)" >>"$work/calls.tsv"
  export_all
  echo "gpu-fullcard: stopped from outside during step $next; wrote $out" >&2
  exit 143
}
trap on_signal TERM INT HUP
torch_versions=$(timeout 120 python3 -c 'import torch, transformers; print("PyTorch", torch.__version__, "transformers", transformers.__version__)' 2>/dev/null || echo 'no PyTorch or transformers')

for i in $(seq "$first" "$last"); do
  s=${steps[$i]}
  next=$s
  room=$((deadline - $(date +%s) - 20))
  if [ "$room" -lt "${min_s[$s]}" ]; then
    stopped="time"
    echo "gpu-fullcard: $room s left of the budget, under step $s's minimum of ${min_s[$s]} s: stopping here" >&2
    break
  fi
  FC_LIMIT=${cap_s[$s]}
  [ "$room" -lt "$FC_LIMIT" ] && FC_LIMIT=$room
  echo "gpu-fullcard: step $s (at most $FC_LIMIT s)" >&2
  s0=$(date +%s)
  timeout -k 20 "$FC_LIMIT" bash "$0" --build "$build" --data-gib "$data_gib" --ctx-mib "$ctx_mib" --run-step "$s" &
  tpid=$!
  wait "$tpid"
  rc=$?
  # Whatever the step left in its process group (its own timeout's) goes now.
  kill -TERM -- -"$tpid" 2>/dev/null && sleep 2 && kill -KILL -- -"$tpid" 2>/dev/null
  tpid=
  {
    echo ""
    case $rc in
      0) echo "_Step $s took $(($(date +%s) - s0)) s of its $FC_LIMIT s._" ;;
      124 | 137) echo "_Step $s was stopped by its time limit of $FC_LIMIT s: what it measured is above; the rest was not run._" ;;
      *) echo "_Step $s ended with exit $rc after $(($(date +%s) - s0)) s._" ;;
    esac
    echo "_Card's used memory after it: $(timeout 20 nvidia-smi --query-gpu=memory.used --format=csv,noheader -i 0 | head -1)._"
  } >>"$work/report/$s.md"
  ran+=("$s")
  if [ "$i" -lt $((${#steps[@]} - 1)) ]; then next=${steps[$((i + 1))]}; else next="done"; fi
  echo "$next" >"$work/next-step"
  write_report
  export_all >/dev/null
done
trap - TERM INT HUP
echo "$next" >"$work/next-step"
write_report
printf '%s\t%s\t%s\t%s\t%s\n' "$call" "$device" "$driver" "$(date -u -d "@$t_start" '+%Y-%m-%d %H:%M:%SZ')" \
  "${ran[*]:-none}" >>"$work/calls.tsv"
echo "gpu-fullcard: wrote $out (logs in $work/logs)"
export_all
if [ "$next" != "done" ]; then
  echo "gpu-fullcard: not run$([ "$stopped" = time ] && echo " for want of time"): steps from $next on; go on with --resume fullcard-work.tar.xz (--from $next)"
fi
exit 0
