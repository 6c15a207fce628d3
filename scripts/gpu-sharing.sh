#!/usr/bin/env bash
# gpu-sharing.sh: a real program's memory under msched's coordinator on a real
# NVIDIA GPU: does a pause take a transformers Llama's memory off the GPU, and
# does a switch between two such jobs move their memory, not a sliver of it?
# Writes bench/results/gpu-sharing-<date>-<device>.md.
#
#   scripts/gpu-sharing.sh [--build DIR] [--tokens N] [--work DIR] [--out FILE]
#
# Steps (each under its own timeout):
#   reference   tests/gpu/llama.py 16 2048 N twice without libmsched, one after
#               the other: the tokens every other run must give, and the time
#               of running two such jobs one at a time
#   pause       one decode under GPU 0's mschedd (the whole card), paused while
#               it decodes (msched pause), held 5 s, resumed; the job's resident
#               bytes as msched counts them and the card's used memory as
#               nvidia-smi reports it, before, during and after the pause
#   pair        two decodes at once under an mschedd with --gpu-memory 3GiB,
#               which cannot hold both (2.3 GB each), so they are time-sliced;
#               what each switch moved (mschedd's timeline), makespan against
#               the reference pair, tokens against the reference
# --tokens N: tokens each decode generates (default 200, about 12 s of decoding
# on an H200, long enough for the pause to land mid-decode).
#
# Safety: the jobs' managed memory (4.7 GB at most) stays far below any
# supported card's free memory; nothing changes the card's clocks, power,
# compute mode or MIG. Without a GPU it says so and exits 0.
set -u -o pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/scripts/gpu-common.sh"
build=$repo/build
tokens=200
work=
out=
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: scripts/gpu-sharing.sh [--build DIR] [--tokens N] [--work DIR] [--out FILE]" >&2; exit 2 ;;
  esac
done
[[ $tokens =~ ^[0-9]+$ ]] && [ "$tokens" -ge 8 ] || { echo "gpu-sharing: --tokens takes a count of at least 8" >&2; exit 2; }
if ! gpu_present; then
  echo "gpu-sharing: no NVIDIA GPU here (nvidia-smi finds none); nothing to measure."
  exit 0
fi
for f in tools/msched tools/mschedd hook/libmsched.so; do
  [ -e "$build/$f" ] || { echo "gpu-sharing: $build/$f is missing; build msched or pass --build DIR" >&2; exit 1; }
done
gpu_facts
today=$(date +%Y-%m-%d)
work=${work:-$(mktemp -d /tmp/msched-gpu-sharing.XXXXXX)}
out=${out:-$repo/bench/results/gpu-sharing-$today-$slug.md}
logs=$work/logs
mkdir -p "$logs"
msched=$build/tools/msched
decode=(python3 "$repo/tests/gpu/llama.py" 16 2048 "$tokens")
export MSCHED_SOCKET_DIR=$work/sockets
mkdir -p -m 0700 "$MSCHED_SOCKET_DIR"
sock=$MSCHED_SOCKET_DIR/gpu0.sock

report() { echo "$*" >>"$out.tmp"; }
tokens_of() { sed -n 's/.*"tokens_hash": "\([0-9a-f]*\)".*/\1/p' "$logs/$1.out" | head -1; }
token_ms() { sed -n 's/.*"token_ms_median": \([0-9.]*\).*/\1/p' "$logs/$1.out" | head -1; }
same_tokens() { local t; t=$(tokens_of "$1"); [ -n "$t" ] && [ "$t" = "$ref_tokens" ] && echo "same ($t)" || echo "DIFFER (${t:-none}; exit $(cat "$logs/$1.rc" 2>/dev/null))"; }
used_mib() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | head -1; }
# job_fields NAME FIELD...: the FIELDs of the job named NAME, from one
# msched status --json, on one line.
job_fields() {
  "$msched" status --gpu 0 --json 2>/dev/null | python3 -c '
import json, sys
try:
    jobs = json.load(sys.stdin)["jobs"]
except ValueError:
    sys.exit(0)
for j in jobs:
    if j.get("name") == sys.argv[1]:
        print(*(j.get(f, "") for f in sys.argv[2:]))
        break' "$@"
}
start_mschedd() {  # start_mschedd NAME ARGS...: GPU 0's coordinator, logged as NAME
  local name=$1; shift
  "$build/tools/mschedd" --gpu 0 "$@" --log "$logs/$name-mschedd.log" --trace "$logs/$name-trace.json" &
  dpid=$!
  wait_for_socket "$sock" || echo "gpu-sharing: mschedd did not open $sock" >&2
}
stop_mschedd() { kill "$dpid" 2>/dev/null; wait "$dpid" 2>/dev/null; }
# job NAME LIMIT: a decode under msched run on GPU 0, in the background (pid in $jpid).
job() {
  MSCHED_STATS=$logs/$1.stats.json MSCHED_LOG=$logs/$1.log MSCHED_LOG_LEVEL=info MSCHED_COORD=required \
    timeout "$2" "$msched" run --gpu 0 --mem 2400M --name "$1" -- "${decode[@]}" >"$logs/$1.out" 2>&1 &
  jpid=$!
}
finish() { wait "$1"; echo $? >"$logs/$2.rc"; }
stats() { python3 "$repo/tests/gpu/summarize_stats.py" "$logs/$1.stats.json" "${@:2}" | tr '\n' ' '; }

rm -f "$out.tmp"
report "# A real program's memory under msched's coordinator: $device, $today"
report ""
report "Written by \`scripts/gpu-sharing.sh\` (commit $(git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)). Device: $device, driver $driver, $(nvidia-smi --query-gpu=memory.total,memory.used --format=csv,noheader | head -1) (total, used at start); $(python3 -c 'import torch, transformers; print("PyTorch", torch.__version__, "transformers", transformers.__version__)' 2>/dev/null || echo 'no PyTorch or transformers'). The program: \`tests/gpu/llama.py 16 2048 $tokens\` (transformers LlamaForCausalLM, random fp16 weights, 2.2 GB, greedy decode of $tokens tokens at batch 1), with the shipped templates. Raw logs: $logs."

echo "gpu-sharing: reference decodes" >&2
# Python's first import of torch on a fresh machine reads from a cold disk
# cache; it would be charged to the first reference run alone.
timeout 120 python3 -c 'import torch, transformers' >/dev/null 2>&1
t0=$(date +%s.%N)
for r in 1 2; do
  timeout 120 "${decode[@]}" >"$logs/reference-$r.out" 2>&1
  echo $? >"$logs/reference-$r.rc"
done
t1=$(date +%s.%N)
sequential=$(seconds_between "$t0" "$t1")
ref_tokens=$(tokens_of reference-1)
idle_used=$(used_mib)

echo "gpu-sharing: pause and resume" >&2
report ""
report "## Pausing a decode"
report ""
report "One decode under GPU 0's mschedd (the whole card), \`msched pause\` once it has allocated its weights and decoded for 3 s, held paused 5 s, then \`msched resume\`. Resident bytes are \`msched status\`'s figure: what the job reported at its last stop, raised to what its turn brings in (its declared 2400M in its first turn); the card's used memory is nvidia-smi's, $idle_used MiB with no job."
report ""
start_mschedd pause
job decode 150
decode_pid=$jpid
for _ in $(seq 240); do
  a=$(job_fields decode allocated_bytes)
  [ -n "$a" ] && [ "$a" -ge 2000000000 ] && break
  sleep 0.25
done
sleep 3
r_before=$(job_fields decode resident_bytes); u_before=$(used_mib)
p0=$(date +%s.%N)
timeout 90 "$msched" pause --gpu 0 --timeout 60s decode >"$logs/pause.out" 2>&1; pause_rc=$?
p1=$(date +%s.%N)
read -r r_paused s_paused < <(job_fields decode resident_bytes run_state); u_paused=$(used_mib)
sleep 5
read -r r_held s_held < <(job_fields decode resident_bytes run_state); u_held=$(used_mib)
q0=$(date +%s.%N)
timeout 90 "$msched" resume --gpu 0 --timeout 60s decode >"$logs/resume.out" 2>&1; resume_rc=$?
q1=$(date +%s.%N)
sleep 2
r_after=$(job_fields decode resident_bytes); u_after=$(used_mib)
finish "$decode_pid" decode
stop_mschedd
report "| moment | job's resident bytes | card's used memory | job's state |"
report "|---|---:|---:|---|"
report "| decoding, before the pause | $r_before | $u_before MiB | running |"
report "| \`msched pause\` returned (exit $pause_rc, $(seconds_between "$p0" "$p1") s) | $r_paused | $u_paused MiB | $s_paused |"
report "| paused 5 s | $r_held | $u_held MiB | $s_held |"
report "| 2 s after \`msched resume\` returned (exit $resume_rc, $(seconds_between "$q0" "$q1") s) | $r_after | $u_after MiB | |"
report ""
report "Tokens: $(same_tokens decode) against the run without libmsched. Exit $(cat "$logs/decode.rc"). pause said: \`$(tr '\n' ' ' <"$logs/pause.out")\`; resume said: \`$(tr '\n' ' ' <"$logs/resume.out")\`."
report ""
report "Job counters: $(stats decode allocations. bytes. coordinator. launches.)"

echo "gpu-sharing: a time-sliced pair" >&2
report ""
report "## Two decodes time-sliced"
report ""
report "Two decodes started together under an mschedd with \`--gpu-memory 3GiB\` (\`msched run --gpu 0 --mem 2400M\` each), which cannot hold both, against the same two run one after the other without libmsched (the reference runs)."
report ""
start_mschedd pair --gpu-memory 3GiB
t0=$(date +%s.%N)
job pair-1 240; p1pid=$jpid
job pair-2 240; p2pid=$jpid
finish "$p1pid" pair-1
finish "$p2pid" pair-2
t1=$(date +%s.%N)
"$msched" status --gpu 0 >"$logs/pair-status.out" 2>&1
stop_mschedd
report "| run | wall s | tokens |"
report "|---|---:|---|"
report "| both at once under mschedd | $(seconds_between "$t0" "$t1") | $(same_tokens pair-1); $(same_tokens pair-2) |"
report "| one after the other, no libmsched | $sequential | $(same_tokens reference-1); $(same_tokens reference-2) |"
report ""
report "What the switches moved (mschedd's timeline; a swap-out is the drop in the job's resident bytes the job reported as it stopped):"
report ""
python3 "$repo/tests/gpu/summarize_swaps.py" "$logs/pair-trace.json" >>"$out.tmp"
report ""
for j in 1 2; do report "pair-$j counters: $(stats "pair-$j" allocations. bytes. coordinator.)"; report ""; done
report "Median token, ms (each run's own figure): reference $(token_ms reference-1) $(token_ms reference-2) | paused run $(token_ms decode) | pair $(token_ms pair-1) $(token_ms pair-2)"
for n in decode pair-1 pair-2; do
  if [ "$(cat "$logs/$n.rc")" != 0 ]; then report ""; report "$n output:"; report '```'; tail -8 "$logs/$n.out" >>"$out.tmp"; report '```'; fi
done
mv "$out.tmp" "$out"
echo "gpu-sharing: wrote $out (logs in $logs)"
