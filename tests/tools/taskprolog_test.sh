#!/usr/bin/env bash
# The Slurm TaskProlog (packaging/slurm/msched-taskprolog.in, docs/slurm.md)
# under dash, Debian's /bin/sh, on environments and msched.conf files a
# hostile or careless user can make. Whatever they hold, the prolog prints
# only the lines it means to: no value adds an "export" line or swallows
# one, the LD_PRELOAD line is there or the task fails with a "print msched
# TaskProlog: ..." message, MSCHED_MEM is the decimal shards x ShardMemory or
# the task fails saying why, and a bad msched.conf (a device, a FIFO, a huge
# file) ends it within 5 seconds. Settings that work keep working.
#   taskprolog_test.sh PROLOG
# PROLOG is the configured TaskProlog (the build tree's
# packaging/slurm-taskprolog). It runs a copy in a temporary tree with a
# stand-in libmsched.so where the copy looks for it. Each case prints its
# name and PASS or FAIL; the last line counts them, and the exit status is
# non-zero when any failed.
set -uo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 PROLOG" >&2
  exit 2
fi
prolog_in=$1
[ -r "$prolog_in" ] || { echo "no TaskProlog at $prolog_in" >&2; exit 2; }
dash=$(command -v dash) || { echo "dash is missing (Debian's dash package): the TaskProlog is tested under it" >&2; exit 2; }
timeout=$(command -v timeout) || { echo "timeout (coreutils) is missing" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The prolog finds libmsched.so at a path relative to its own directory,
# written into it when configured (lib_dir=$(cd "$(dirname "$0")/REL" ...).
rel=$(sed -n 's|^lib_dir=$(cd "$(dirname "$0")/\([^"]*\)".*|\1|p' "$prolog_in")
[ -n "$rel" ] || { echo "cannot find the library directory in $prolog_in" >&2; exit 2; }
bin=$tmp/tree/1/2/3/4/5/6/libexec/msched
mkdir -p "$bin" "$bin/$rel"
cp "$prolog_in" "$bin/slurm-taskprolog"
prolog=$bin/slurm-taskprolog
: >"$bin/$rel/libmsched.so"
lib=$(cd "$bin/$rel" && pwd)/libmsched.so

passed=0
failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
failure() { echo "FAIL $1: $2"; failed=$((failed + 1)); }

# run CONF_DIR [NAME=VALUE...]: runs the prolog under dash with only those
# variables and SLURM_CONF=CONF_DIR/slurm.conf, within 5 seconds; sets out
# (what it printed on stdout, whole) and rc.
run() {
  local dir=$1
  shift
  rc=0
  env -i PATH=/usr/bin:/bin SLURM_CONF="$dir/slurm.conf" "$@" \
    "$timeout" -s KILL 5 "$dash" "$prolog" >"$tmp/out" 2>"$tmp/stderr" || rc=$?
  # The x keeps trailing newlines: a swallowed or an added one shows.
  out=$(cat "$tmp/out"; printf x)
  out=${out%x}
}

# ok NAME CONF_DIR EXPECTED [NAME=VALUE...]: wants exit 0 and exactly the
# lines EXPECTED (each ended by a newline; "" for no output).
ok() {
  local name=$1 dir=$2 expected=$3
  shift 3
  local start=$SECONDS
  run "$dir" "$@"
  [ -z "$expected" ] || expected+=$'\n'
  if [ "$rc" -eq 137 ] || [ "$rc" -eq 124 ]; then
    failure "$name" "still running after 5 s (killed after $((SECONDS - start)) s)"
  elif [ "$rc" -ne 0 ] || [ "$out" != "$expected" ]; then
    failure "$name" "wanted (exit 0):"$'\n'"$expected"$'\n'"got (exit $rc):"$'\n'"$out$(cat "$tmp/stderr")"
  else
    pass "$name"
  fi
}

# refused NAME CONF_DIR TEXT [NAME=VALUE...]: wants a non-zero exit and one
# line alone, "print msched TaskProlog: ..." containing TEXT.
refused() {
  local name=$1 dir=$2 text=$3
  shift 3
  local start=$SECONDS
  run "$dir" "$@"
  if [ "$rc" -eq 137 ] || [ "$rc" -eq 124 ]; then
    failure "$name" "still running after 5 s (killed after $((SECONDS - start)) s)"
  elif [ "$rc" -eq 0 ] || [ "${out#print msched TaskProlog: *"$text"*$'\n'}" != "" ] ||
       [ "${out%%$'\n'*}"$'\n' != "$out" ]; then
    failure "$name" "wanted a failure, one line saying '$text', got (exit $rc):"$'\n'"$out$(cat "$tmp/stderr")"
  else
    pass "$name"
  fi
}

# conf NAME: a directory with msched.conf made from the lines on stdin
# (printed as they are: printf '%s' keeps backslashes); prints its path.
conf() {
  mkdir -p "$tmp/$1"
  cat >"$tmp/$1/msched.conf"
  echo "$tmp/$1"
}

plain=$(printf '%s\n' '# a node' 'ShardMemory=1GiB' 'SocketDir=/run/msched-test' | conf plain)
none=$tmp/none
mkdir -p "$none"
# What a task on GPU 0 gets with $plain's settings, for job 9 (step STEP).
whole0() {
  printf '%s\n' "export MSCHED_JOB_NAME=slurm-9${1:+.$1}" \
    "export MSCHED_SOCKET=/run/msched-test/gpu0.sock" "export LD_PRELOAD=$lib"
}

echo "== values printed as they are, or refused: no line added or swallowed"
ok "job id with a backslash-n prints it, adds no export line" "$plain" \
  "export MSCHED_JOB_NAME=slurm-9\\nexport EVIL=2.1
export MSCHED_SOCKET=/run/msched-test/gpu0.sock
export LD_PRELOAD=$lib" SLURM_JOB_ID='9\nexport EVIL=2' SLURM_STEP_ID=1 SLURM_STEP_GPUS=0
ok "step id with a backslash-c keeps the MSCHED_SOCKET line" "$plain" \
  "export MSCHED_JOB_NAME=slurm-9.1\\c
export MSCHED_SOCKET=/run/msched-test/gpu0.sock
export LD_PRELOAD=$lib" SLURM_JOB_ID=9 SLURM_STEP_ID='1\c' SLURM_STEP_GPUS=0
ok "SocketDir with a backslash-c keeps the LD_PRELOAD line" \
  "$(printf '%s\n' 'SocketDir=/run/ms\cched' | conf backslash-c)" \
  "export MSCHED_JOB_NAME=slurm-9
export MSCHED_SOCKET=/run/ms\\cched/gpu0.sock
export LD_PRELOAD=$lib" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0
ok "a job's preload with a backslash-n is kept as it is" "$plain" \
  "export MSCHED_JOB_NAME=slurm-9
export MSCHED_SOCKET=/run/msched-test/gpu0.sock
export LD_PRELOAD=$lib:/opt/a\\nexport EVIL=1" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0 LD_PRELOAD='/opt/a\nexport EVIL=1'
refused "job id with a newline is refused" "$plain" "SLURM_JOB_ID holds a control character" \
  SLURM_JOB_ID=$'9\nexport EVIL=2' SLURM_JOB_GPUS=0
refused "step id with a newline is refused" "$plain" "SLURM_STEP_ID holds a control character" \
  SLURM_JOB_ID=9 SLURM_STEP_ID=$'1\nexport EVIL=2' SLURM_STEP_GPUS=0
refused "a job's preload with a newline is refused" "$plain" "LD_PRELOAD holds a control character" \
  SLURM_JOB_ID=9 SLURM_JOB_GPUS=0 LD_PRELOAD=$'/opt/a.so\nexport EVIL=1'
refused "an empty SocketDir is refused" "$(printf '%s\n' 'SocketDir=' | conf socketdir-empty)" \
  "SocketDir is empty" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0
refused "a relative SocketDir is refused" "$(printf '%s\n' 'SocketDir=run/msched' | conf socketdir-relative)" \
  "SocketDir 'run/msched' is not an absolute path" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0
# /gpu0.sock is 10 bytes: a SocketDir of 97 fits 107 exactly, one more does not.
ok "a SocketDir whose socket fits 107 bytes exactly is taken" \
  "$(printf 'SocketDir=/%s\n' "$(head -c 96 /dev/zero | tr '\0' d)" | conf socketdir-107)" \
  "export MSCHED_JOB_NAME=slurm-9
export MSCHED_SOCKET=/$(head -c 96 /dev/zero | tr '\0' d)/gpu0.sock
export LD_PRELOAD=$lib" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0
refused "an over-long SocketDir is refused" \
  "$(printf 'SocketDir=/%s\n' "$(head -c 97 /dev/zero | tr '\0' d)" | conf socketdir-108)" \
  "SocketDir is too long" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0
refused "an over-long SocketDir is refused for any of the task's GPUs" \
  "$(printf 'SocketDir=/%s\n' "$(head -c 96 /dev/zero | tr '\0' d)" | conf socketdir-gpu10)" \
  "more than a Unix socket's 107" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0,10
refused "SocketDir with an escape character is refused" \
  "$(printf 'SocketDir=/run/a\033[2Jb\n' | conf escape)" "SocketDir holds a control character" \
  SLURM_JOB_ID=9 SLURM_JOB_GPUS=0
refused "a message quoting a newline stays one line" "$plain" "is not a count of shards" \
  SLURM_JOB_ID=9 SLURM_JOB_GPUS=0 SLURM_SHARDS_ON_NODE=$'1\nexport EVIL=1'
refused "a message quoting a backslash-n stays one line" \
  "$(printf '%s\n' 'Shard\nMem=1GiB' | conf backslash-key)" "msched.conf:1: unknown setting 'Shard\\nMem'" \
  SLURM_JOB_ID=9 SLURM_JOB_GPUS=0

echo "== shard counts are decimal and bounded, MSCHED_MEM does not wrap"
ok "SLURM_SHARDS_ON_NODE=010 is 10 shards, not octal 8" "$plain" "export MSCHED_MEM=$((10 << 30))
$(whole0)" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0 SLURM_SHARDS_ON_NODE=010
ok "SLURM_SHARDS_ON_NODE=08 is 8 shards" "$plain" "export MSCHED_MEM=$((8 << 30))
$(whole0)" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0 SLURM_SHARDS_ON_NODE=08
ok "999999 shards, the most" "$plain" "export MSCHED_MEM=$((999999 << 30))
$(whole0)" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0 SLURM_SHARDS_ON_NODE=999999
refused "a 20-digit count is refused with a message" "$plain" "SLURM_SHARDS_ON_NODE='12345678901234567890' is not a count of shards" \
  SLURM_JOB_ID=9 SLURM_JOB_GPUS=0 SLURM_SHARDS_ON_NODE=12345678901234567890
refused "9999999999 shards are refused, not a negative MSCHED_MEM" "$plain" "SLURM_SHARDS_ON_NODE='9999999999' is not a count of shards" \
  SLURM_JOB_ID=9 SLURM_JOB_GPUS=0 SLURM_SHARDS_ON_NODE=9999999999
refused "1000000 shards are refused" "$plain" "is not a count of shards" \
  SLURM_JOB_ID=9 SLURM_JOB_GPUS=0 SLURM_SHARDS_ON_NODE=1000000
huge=$(printf '%s\n' 'ShardMemory=8000000TiB' | conf huge)
ok "one shard of 8000000TiB fits 2^63-1 bytes" "$huge" "export MSCHED_MEM=8796093022208000000
export MSCHED_JOB_NAME=slurm-9
export MSCHED_SOCKET=/run/msched/gpu0.sock
export LD_PRELOAD=$lib" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0 SLURM_SHARDS_ON_NODE=1
refused "two shards of 8000000TiB would wrap: refused" "$huge" "2 shards of ShardMemory 8000000TiB are more than 2^63-1 bytes" \
  SLURM_JOB_ID=9 SLURM_JOB_GPUS=0 SLURM_SHARDS_ON_NODE=2
refused "ShardMemory past 2^63-1 bytes is not a size" \
  "$(printf '%s\n' 'ShardMemory=9000000TiB' | conf too-huge)" "ShardMemory '9000000TiB' is not a size" \
  SLURM_JOB_ID=9 SLURM_JOB_GPUS=0 SLURM_SHARDS_ON_NODE=1

echo "== a bad msched.conf ends the prolog within 5 s"
mkdir -p "$tmp/zero"
ln -s /dev/zero "$tmp/zero/msched.conf"
refused "a link to /dev/zero is refused" "$tmp/zero" "msched.conf is not a regular file" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0
mkdir -p "$tmp/fifo"
mkfifo "$tmp/fifo/msched.conf"
refused "a FIFO is refused" "$tmp/fifo" "msched.conf is not a regular file" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0
comments=$( { for ((i = 0; i < 20000; i++)); do echo '#'; done; echo 'ShardMemory=2GiB'; } | conf comments)
ok "20,000 comment lines, then a setting" "$comments" "export MSCHED_MEM=$((3 << 31))
export MSCHED_JOB_NAME=slurm-9
export MSCHED_SOCKET=/run/msched/gpu1.sock
export LD_PRELOAD=$lib" SLURM_JOB_ID=9 SLURM_JOB_GPUS=1 SLURM_SHARDS_ON_NODE=3
refused "a 1 MB value is refused" \
  "$( { printf 'SocketDir=/'; head -c 1000000 /dev/zero | tr '\0' a; echo; } | conf value-1mb)" \
  "msched.conf is larger than 64 KiB" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0
# 64 KiB exactly: a comment line of 65536 - 17 - 1 bytes, then a setting.
ok "64 KiB exactly is read" \
  "$( { printf '#'; head -c $((65536 - 17 - 2)) /dev/zero | tr '\0' c; echo; echo 'ShardMemory=2GiB'; } | conf size-64k)" \
  "export MSCHED_MEM=$((1 << 31))
export MSCHED_JOB_NAME=slurm-9
export MSCHED_SOCKET=/run/msched/gpu0.sock
export LD_PRELOAD=$lib" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0 SLURM_SHARDS_ON_NODE=1
refused "64 KiB and one byte are refused" \
  "$( { printf '#'; head -c $((65536 - 17 - 1)) /dev/zero | tr '\0' c; echo; echo 'ShardMemory=2GiB'; } | conf size-64k1)" \
  "msched.conf is larger than 64 KiB" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0
mkdir -p "$tmp/dir/msched.conf"
refused "a directory is refused" "$tmp/dir" "msched.conf is not a regular file" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0

echo "== settings that work keep working"
ok "no GPU: nothing" "$plain" "" SLURM_JOB_ID=9
ok "a whole GPU with no msched.conf" "$none" "export MSCHED_JOB_NAME=slurm-9
export MSCHED_SOCKET=/run/msched/gpu0.sock
export LD_PRELOAD=$lib" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0
ok "comments, blanks and case in msched.conf" \
  "$(printf '%s\n' '  # a comment' '' $'\tshardmemory = 2GiB   # per shard' \
       $'SOCKETDIR\t=\t/run/my msched  ' | conf layout)" \
  "export MSCHED_MEM=$((3 << 31))
export MSCHED_JOB_NAME=slurm-9.4
export MSCHED_SOCKET=/run/my msched/gpu1.sock
export LD_PRELOAD=$lib" SLURM_JOB_ID=9 SLURM_STEP_ID=4 SLURM_JOB_GPUS=1 SLURM_STEP_GPUS=1 SLURM_SHARDS_ON_NODE=3
ok "CRLF lines, no newline at the end, a later setting wins" \
  "$(printf 'ShardMemory=1GiB\r\nSocketDir=/run/a\r\nshardMemory=4GiB' | conf crlf)" \
  "export MSCHED_MEM=$((2 << 32))
export MSCHED_JOB_NAME=slurm-9
export MSCHED_SOCKET=/run/a/gpu0.sock
export LD_PRELOAD=$lib" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0 SLURM_SHARDS_ON_NODE=2
ok "a link to a regular msched.conf is read" \
  "$(mkdir -p "$tmp/link" && ln -s "$plain/msched.conf" "$tmp/link/msched.conf" && echo "$tmp/link")" \
  "export MSCHED_MEM=$((2 << 30))
$(whole0 1)" SLURM_JOB_ID=9 SLURM_STEP_ID=1 SLURM_STEP_GPUS=0 SLURM_SHARDS_ON_NODE=2
ok "SLURM_SHARDS_ON_NODE=0 is no shards" "$plain" "$(whole0)" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0 SLURM_SHARDS_ON_NODE=0
ok "shards of two GPUs: left alone" "$plain" "" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0,1 SLURM_SHARDS_ON_NODE=2
ok "GPUs 0 and 2, whole" "$plain" "export MSCHED_JOB_NAME=slurm-9.1
export MSCHED_SOCKET_DIR=/run/msched-test
unset MSCHED_SOCKET
export LD_PRELOAD=$lib" SLURM_JOB_ID=9 SLURM_STEP_ID=1 SLURM_JOB_GPUS=0,2 SLURM_STEP_GPUS=0,2
ok "a step inside a batch script under msched" "$plain" "export MSCHED_JOB_NAME=slurm-9.2
export MSCHED_SOCKET=/run/msched-test/gpu0.sock" SLURM_JOB_ID=9 SLURM_STEP_ID=2 SLURM_STEP_GPUS=0 \
  LD_PRELOAD="$lib" PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
ok "a job's own preload comes after libmsched.so" "$plain" "export MSCHED_JOB_NAME=slurm-9
export MSCHED_SOCKET=/run/msched-test/gpu0.sock
export LD_PRELOAD=$lib:/opt/other.so" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0 LD_PRELOAD=/opt/other.so
refused "a misspelt setting, with its file and line" \
  "$(printf '%s\n' '# first' 'SocketDir=/run/a' 'ShardMem=2GiB' | conf misspelt)" \
  "$tmp/misspelt/msched.conf:3: unknown setting 'ShardMem' (known: ShardMemory, SocketDir)" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0
refused "a line without '=', with its file and line" \
  "$(printf '%s\n' '' 'ShardMemory 2GiB' | conf no-equals)" \
  "$tmp/no-equals/msched.conf:2: expected Key=Value, got 'ShardMemory 2GiB'" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0
refused "a size it cannot read" "$(printf '%s\n' 'ShardMemory=2 GiB' | conf bad-size)" \
  "ShardMemory '2 GiB' is not a size such as 4GiB" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0 SLURM_SHARDS_ON_NODE=1
refused "shards with no ShardMemory" "$none" "sets no ShardMemory" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0 SLURM_SHARDS_ON_NODE=1

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
