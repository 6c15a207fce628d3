#!/usr/bin/env bash
# Slurm integration (docs/slurm.md) on a real slurmctld, slurmd and munged,
# started here on 127.0.0.1 with everything they write in a temporary
# directory. The node declares the simulated GPU (64 MiB) as gres/gpu and 16
# gres/shard; msched.conf beside slurm.conf makes a shard 8 MiB; the
# installed TaskProlog puts each job under the node's coordinator, a root
# mschedd whose socket directory belongs to the msched group, as
# mschedd@.service runs it. Two users, members of that group, submit jobs.
# It checks that:
#   - the installed TaskProlog, run alone on the environments slurmstepd
#     gives it, exports what docs/slurm.md says, and refuses settings it
#     cannot use;
#   - one job of each user, 5 shards (40 MiB) each, whose memory together
#     exceeds the GPU (run side by side without msched, one runs out of
#     memory), are admitted side by side and both complete with exit code
#     0, the checksums they compute alone and no out-of-memory error;
#   - while they run, msched status names them slurm-<job id>, with their
#     users' uids and the 40 MiB from their request; a user sees the other
#     user's job without its name;
#   - a running job its user scancels is killed, and leaves the
#     coordinator's live jobs, its memory with it;
#   - a misspelt msched.conf fails a job, its output saying why.
# Needs root (it adds two users, and the msched group if missing) and
# Debian's slurm-wlm (Slurm 22.05) and munge (scripts/setup.sh).
# Every daemon, user and file it makes is removed on exit, pass or fail;
# on failure the daemons' logs and the jobs' output are printed first
# (MSCHED_SLURM_TEST_KEEP=1 keeps the directory as well).
#
#   slurm_test.sh CMAKE BUILD_DIR INSTALL_LIBDIR MSIM_RUN SIM_LIB_DIR
set -euo pipefail

if [ $# -ne 5 ]; then
  echo "usage: $0 CMAKE BUILD_DIR INSTALL_LIBDIR MSIM_RUN SIM_LIB_DIR" >&2
  exit 2
fi
cmake=$1 build=$2 libdir=$3 msim_run=$4 sim_lib=$5

fail() {
  echo "slurm_test: FAIL: $*" >&2
  exit 1
}
log() { echo "slurm_test: $*"; }

[ "$(id -u)" -eq 0 ] || fail "needs root: it adds users and runs slurmctld, slurmd and munged"
for tool in slurmctld slurmd sbatch squeue scontrol scancel sinfo munged useradd userdel groupadd runuser python3; do
  command -v "$tool" >/dev/null ||
    fail "$tool is missing: this test needs Debian's slurm-wlm (Slurm 22.05) and munge packages (scripts/setup.sh installs them)"
done

readonly kMiB=$((1 << 20))
readonly hbm=$((64 * kMiB))           # the simulated GPU
readonly shards=16 shard_mib=8        # 16 x 8 MiB = 2 x HBM: mschedd's default --oversubscribe
readonly job_shards=5                 # 40 MiB a job; two jobs need 80 MiB
readonly foot=$((36 * kMiB))          # what each job allocates (micro_vadd: three buffers of 12 MiB)
readonly tasks=3000                   # a few seconds each, so that the two overlap
start=$(date +%s)

tmp=$(mktemp -d /tmp/msched-slurm.XXXXXX)
chmod 755 "$tmp"  # the users reach the installed tree, the socket directory and their homes through it
export SLURM_CONF=$tmp/etc/slurm.conf
node=msched-node
device=slurmtest$$
users=()
created_group=""
pids=()        # daemons, stopped in reverse order
failed=1

cleanup() {
  set +e
  if [ "$failed" -ne 0 ]; then
    for f in "$tmp"/log/* "$tmp"/home-*/*.out "$tmp"/home-*/*.err; do
      [ -f "$f" ] || continue
      echo "----- $f (last 60 lines)" >&2
      tail -n 60 "$f" >&2
    done
  fi
  # Jobs first, while slurmctld and slurmd can still end them; then any
  # process left to the test's own users.
  if [ ${#users[@]} -gt 0 ] && [ -n "${slurmd_pid:-}" ]; then
    for u in "${users[@]}"; do scancel --user="$u" 2>/dev/null; done
    for _ in $(seq 1 50); do
      [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[i]}" 2>/dev/null; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  for u in "${users[@]}"; do
    pkill -KILL -u "$u" 2>/dev/null  # the users exist only for this test
    userdel "$u" 2>/dev/null || echo "slurm_test: could not remove user $u" >&2
  done
  # Only if it made the group and nobody else is in it now: another run of
  # this test (another build tree) may be using it.
  [ -n "$created_group" ] && [ -z "$(getent group msched | cut -d: -f4)" ] && groupdel msched
  rm -f "/dev/shm/msim-$device" "/dev/shm/msim-${device}oom"
  if [ "${MSCHED_SLURM_TEST_KEEP:-0}" = 1 ]; then
    echo "slurm_test: kept $tmp" >&2
  else
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT

# until SECONDS DESCRIPTION COMMAND...: runs COMMAND every 0.2 s until it
# succeeds; fails the test after SECONDS.
until_true() {
  local seconds=$1 what=$2
  shift 2
  local deadline=$(($(date +%s) + seconds))
  until "$@"; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "timed out after ${seconds}s waiting for $what"
    sleep 0.2
  done
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ---- msched, installed ----------------------------------------------------
"$cmake" --install "$build" --prefix "$tmp/prefix" >/dev/null
prefix=$tmp/prefix
prolog=$prefix/libexec/msched/slurm-taskprolog
[ -x "$prolog" ] || fail "the install has no TaskProlog at $prolog"
workloads=$prefix/share/msched/bench/workloads
msched_cli=$prefix/bin/msched
lib=$prefix/$libdir/msched/libmsched.so

# ---- the TaskProlog alone, on the environments slurmstepd gives it ---------
# prolog_case DESCRIPTION EXPECTED [NAME=VALUE...]: runs the installed
# prolog with only those variables (and msched.conf beside $tmp/case/slurm.conf)
# and compares what it prints; EXPECTED "fail:TEXT" wants a non-zero exit
# and a "print" line containing TEXT.
mkdir -p "$tmp/case"
prolog_case() {
  local what=$1 expected=$2 out rc=0
  shift 2
  out=$(env -i PATH=/usr/bin:/bin SLURM_CONF="$tmp/case/slurm.conf" "$@" "$prolog") || rc=$?
  if [ "${expected#fail:}" != "$expected" ]; then
    [ "$rc" -ne 0 ] && [ "${out#print msched TaskProlog: *"${expected#fail:}"}" != "$out" ] ||
      fail "TaskProlog, $what: wanted a failure saying '${expected#fail:}', got (exit $rc): $out"
  else
    [ "$rc" -eq 0 ] && [ "$out" = "$expected" ] ||
      fail "TaskProlog, $what: wanted (exit 0):"$'\n'"$expected"$'\n'"got (exit $rc):"$'\n'"$out"
  fi
}
printf '%s\n' '# a comment' '  shardmemory = 2GiB  # per shard' 'SocketDir=/run/msched-test' >"$tmp/case/msched.conf"
prolog_case "no GPU" "" SLURM_JOB_ID=9
prolog_case "shards of two GPUs" "" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0,1 SLURM_SHARDS_ON_NODE=2
prolog_case "GPUs 0 and 2, whole" "export MSCHED_JOB_NAME=slurm-9.1
export MSCHED_SOCKET_DIR=/run/msched-test
unset MSCHED_SOCKET
export LD_PRELOAD=$lib" SLURM_JOB_ID=9 SLURM_STEP_ID=1 SLURM_JOB_GPUS=0,2 SLURM_STEP_GPUS=0,2 MSCHED_SOCKET=/tmp/mine/gpu0.sock
prolog_case "GPU 01 is GPU 1" "export MSCHED_JOB_NAME=slurm-9
export MSCHED_SOCKET=/run/msched-test/gpu1.sock
export LD_PRELOAD=$lib" SLURM_JOB_ID=9 SLURM_JOB_GPUS=01
prolog_case "not a list of indexes" "" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0,
prolog_case "a batch script with 3 shards of GPU 1" "export MSCHED_MEM=$((3 << 31))
export MSCHED_JOB_NAME=slurm-9
export MSCHED_SOCKET=/run/msched-test/gpu1.sock
export LD_PRELOAD=$lib" SLURM_JOB_ID=9 SLURM_JOB_GPUS=1 SLURM_SHARDS_ON_NODE=3
prolog_case "step 2 with a whole GPU, inside a batch script under msched" "export MSCHED_JOB_NAME=slurm-9.2
export MSCHED_SOCKET=/run/msched-test/gpu0.sock" SLURM_JOB_ID=9 SLURM_STEP_ID=2 SLURM_JOB_GPUS=0 SLURM_STEP_GPUS=0 \
  LD_PRELOAD="$lib" PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
prolog_case "a job's own preload" "export MSCHED_JOB_NAME=slurm-9
export MSCHED_SOCKET=/run/msched-test/gpu0.sock
export LD_PRELOAD=$lib:/opt/other.so" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0 LD_PRELOAD=/opt/other.so
printf '%s\n' 'ShardMemory=2 GiB' >"$tmp/case/msched.conf"
prolog_case "a size it cannot read" "fail:ShardMemory '2 GiB' is not a size" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0 SLURM_SHARDS_ON_NODE=1
printf '%s\n' 'ShardMem=2GiB' >"$tmp/case/msched.conf"
prolog_case "a misspelt setting" "fail:unknown setting 'ShardMem'" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0
rm "$tmp/case/msched.conf"
prolog_case "shards with no ShardMemory" "fail:sets no ShardMemory" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0 SLURM_SHARDS_ON_NODE=1
prolog_case "a whole GPU with no msched.conf" "export MSCHED_JOB_NAME=slurm-9
export MSCHED_SOCKET=/run/msched/gpu0.sock
export LD_PRELOAD=$lib" SLURM_JOB_ID=9 SLURM_JOB_GPUS=0
log "the TaskProlog alone: as expected"

# What each job computes alone, in plain device memory on a GPU big enough.
job_args=("$workloads/micro_vadd.json" --set "FOOT=$foot" --set "TASKS=$tasks")
reference=$(env -u MSIM_DEVICE -u LD_PRELOAD MSIM_HBM_BYTES=$((4 * hbm)) "$msim_run" "${job_args[@]}" | grep '^checksum ')
[ -n "$reference" ] || fail "the reference run printed no checksum"

# The same two jobs side by side on the 64 MiB GPU without msched: the
# second to allocate runs out of memory. This is what msched must prevent.
oom_env=(env -u LD_PRELOAD MSIM_DEVICE="${device}oom" MSIM_HBM_BYTES="$hbm" MSIM_START_BARRIER=2)
"${oom_env[@]}" "$msim_run" "${job_args[@]}" >/dev/null 2>"$tmp/oom1.err" &
oom1=$!
"${oom_env[@]}" "$msim_run" "${job_args[@]}" >/dev/null 2>"$tmp/oom2.err" || true
wait "$oom1" || true
cat "$tmp/oom1.err" "$tmp/oom2.err" | grep -q CUDA_ERROR_OUT_OF_MEMORY ||
  fail "two jobs of $((foot / kMiB)) MiB fit the $((hbm / kMiB)) MiB GPU without msched: the test shows nothing"

# ---- the users and the simulated GPU -------------------------------------
if ! getent group msched >/dev/null; then
  groupadd --system msched
  created_group=1
fi
for who in a b; do
  u=mslurm-$who-$$
  useradd --no-create-home --home-dir "$tmp/home-$who" --shell /bin/sh --groups msched "$u"
  users+=("$u")
  mkdir -p "$tmp/home-$who"
  chown "$u" "$tmp/home-$who"
done
user_a=${users[0]} user_b=${users[1]}

# The simulated GPU is a shared-memory segment its first user creates, 0600.
# Root powers it on and opens it to every user, as /dev/nvidia* are.
env -u LD_PRELOAD MSIM_DEVICE="$device" MSIM_HBM_BYTES=$hbm "$msim_run" "$workloads/micro_vadd.json" \
  --set FOOT=$kMiB --set TASKS=0 --set WARMUP=0 >/dev/null
chmod 0666 "/dev/shm/msim-$device"

# ---- the coordinator, as mschedd@0.service runs it --------------------------
mkdir -p "$tmp/log" "$tmp/run/msched" "$tmp/etc"
chown root:msched "$tmp/run/msched"
chmod 0750 "$tmp/run/msched"
socket=$tmp/run/msched/gpu0.sock
(umask 0027 && exec "$prefix/bin/mschedd" --socket "$socket" --log "$tmp/log/mschedd.log") </dev/null &
pids+=($!)
until_true 10 "mschedd at $socket" "$msched_cli" --socket "$socket" status >/dev/null 2>&1

# ---- munge and Slurm --------------------------------------------------------
mkdir -p "$tmp/munge" "$tmp/slurm/state" "$tmp/slurm/spool"
chmod 0755 "$tmp/munge"  # every user's sbatch and scancel reach munged's socket
head -c 1024 /dev/urandom >"$tmp/munge/munge.key"
chmod 0400 "$tmp/munge/munge.key"
munge_socket=$tmp/munge/munge.socket
munged --foreground --socket="$munge_socket" --key-file="$tmp/munge/munge.key" \
  --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/log/munged.log" --seed-file="$tmp/munge/munged.seed" \
  </dev/null >/dev/null 2>&1 &
pids+=($!)
until_true 10 "munged's socket" test -S "$munge_socket"

host=$(hostname -s)
cat >"$SLURM_CONF" <<EOF
ClusterName=msched-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$munge_socket
CredType=cred/munge
StateSaveLocation=$tmp/slurm/state
SlurmdSpoolDir=$tmp/slurm/spool
SlurmctldPidFile=$tmp/slurm/slurmctld.pid
SlurmdPidFile=$tmp/slurm/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups: processes are tracked through /proc, tasks are not confined.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=5
# The node is declared, not probed: 8 CPUs whatever the machine has.
SlurmdParameters=config_overrides
GresTypes=gpu,shard
TaskProlog=$prolog
NodeName=$node NodeAddr=127.0.0.1 NodeHostname=$host CPUs=8 RealMemory=1000 Gres=gpu:1,shard:$shards State=UNKNOWN
PartitionName=gpu Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
# slurmd insists on a device file for a GPU it may hand out (a character or
# block device); the simulated GPU has none, so /dev/null stands in.
cat >"$tmp/etc/gres.conf" <<EOF
Name=gpu File=/dev/null
Name=shard Count=$shards
EOF
cat >"$tmp/etc/msched.conf" <<EOF
# one gres/shard is 8 MiB of the 64 MiB GPU: 16 shards are twice its memory
ShardMemory=${shard_mib}MiB
SocketDir=$tmp/run/msched
EOF
chmod 0644 "$tmp"/etc/*.conf

slurmctld -D -i </dev/null >"$tmp/log/slurmctld.stderr" 2>&1 &
pids+=($!)
slurmd -D -N "$node" </dev/null >"$tmp/log/slurmd.stderr" 2>&1 &
slurmd_pid=$!
pids+=("$slurmd_pid")
node_idle() { [ "$(sinfo -h -n "$node" -o %T 2>/dev/null)" = idle ]; }
until_true 30 "node $node to be idle" node_idle
log "slurm up after $(($(date +%s) - start)) s"

# ---- jobs --------------------------------------------------------------------
# submit USER TASKS [SBATCH_OPTION...]: submits a batch job of $job_shards
# shards as USER; prints its id. The job reaches the simulated driver as a
# node's libcuda.so.1 would be reached (LD_LIBRARY_PATH) and prints the
# settings the TaskProlog gave it.
submit() {
  local u=$1 n=$2 home
  shift 2
  home=$(getent passwd "$u" | cut -d: -f6)
  cat >"$home/job-$n.sh" <<EOF
#!/bin/sh
echo "MSCHED_MEM=\$MSCHED_MEM MSCHED_JOB_NAME=\$MSCHED_JOB_NAME MSCHED_SOCKET=\$MSCHED_SOCKET"
export LD_LIBRARY_PATH=$sim_lib MSIM_DEVICE=$device MSCHED_TEMPLATES=$workloads/kernels
exec $msim_run $workloads/micro_vadd.json --set FOOT=$foot --set TASKS=$n
EOF
  chmod 0755 "$home/job-$n.sh"
  runuser -u "$u" -- env -i PATH=/usr/bin:/bin SLURM_CONF="$SLURM_CONF" \
    sbatch --parsable --gres=shard:$job_shards --chdir="$home" --output="$home/%j.out" --error="$home/%j.err" \
    "$@" "$home/job-$n.sh"
}

job_field() { scontrol show job -o "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
job_ended() {
  case $(job_field "$1" JobState) in
    PENDING|CONFIGURING|RUNNING|COMPLETING|SUSPENDED|'') return 1 ;;
  esac
}

status_json() { "$msched_cli" --socket "$socket" status --json; }

# Reads `msched status --json` on stdin and the job ids as arguments; prints
# one line per id: "<live> <state> <uid> <declared> <allocated> <pid>"
# ("-" when not listed), then "together <n>" where n is the memory the
# listed live jobs declared together.
jobs_in_status() {
  python3 -c '
import json, sys
s = json.load(sys.stdin)
jobs = {j["name"]: j for j in s["jobs"]}
together = 0
for id in sys.argv[1:]:
    j = jobs.get("slurm-" + id)
    if j is None:
        print("- - - - - -")
        continue
    live = j["state"] in ("waiting", "running", "paused")
    together += j["declared_bytes"] if live else 0
    print(int(live), j["state"], j["uid"], j["declared_bytes"], j["allocated_bytes"], j["pid"])
print("together", together)
' "$@"
}

# Held, then released together: Slurm starts both in one scheduling pass,
# however loaded the machine is, so that they share the GPU.
job_a=$(submit "$user_a" $tasks --hold)
job_b=$(submit "$user_b" $tasks --hold)
scontrol release "$job_a,$job_b"
log "submitted job $job_a ($user_a) and job $job_b ($user_b), $job_shards shards each"

# While they run: both in msched status at once, under their Slurm ids.
both_live() {
  local lines
  lines=$(status_json | jobs_in_status "$job_a" "$job_b") || return 1
  live_view=$lines
  [ "$(echo "$lines" | awk 'NR <= 2 && $1 == 1' | wc -l)" -eq 2 ]
}
until_true 60 "jobs $job_a and $job_b to be live in msched status together" both_live
log "msched status while both ran:"
"$msched_cli" --socket "$socket" status
declared=$((job_shards * shard_mib * kMiB))
read -r _ _ uid_a declared_a _ _ <<<"$(echo "$live_view" | sed -n 1p)"
read -r _ _ uid_b declared_b _ _ <<<"$(echo "$live_view" | sed -n 2p)"
[ "$uid_a" = "$(id -u "$user_a")" ] || fail "slurm-$job_a runs as uid $uid_a, not $user_a's"
[ "$uid_b" = "$(id -u "$user_b")" ] || fail "slurm-$job_b runs as uid $uid_b, not $user_b's"
[ "$declared_a" = "$declared" ] && [ "$declared_b" = "$declared" ] ||
  fail "the jobs declared $declared_a and $declared_b bytes, not $job_shards x $shard_mib MiB = $declared"
together=$(echo "$live_view" | sed -n 's/^together //p')
[ "$together" -gt "$hbm" ] || fail "the live jobs declared $together bytes together, within the GPU's $hbm"

until_true 90 "jobs $job_a and $job_b to end" eval "job_ended $job_a && job_ended $job_b"
for pair in "$job_a:$tmp/home-a" "$job_b:$tmp/home-b"; do
  id=${pair%%:*} home=${pair#*:}
  state=$(job_field "$id" JobState) code=$(job_field "$id" ExitCode)
  [ "$state" = COMPLETED ] && [ "$code" = 0:0 ] ||
    fail "job $id ended $state with exit code $code: $(cat "$home/$id.err")"
  grep -qx "MSCHED_MEM=$declared MSCHED_JOB_NAME=slurm-$id MSCHED_SOCKET=$socket" "$home/$id.out" ||
    fail "job $id did not get msched's settings from the TaskProlog: $(head -n 1 "$home/$id.out")"
  [ "$(grep '^checksum ' "$home/$id.out")" = "$reference" ] ||
    fail "job $id computed $(grep '^checksum ' "$home/$id.out"), not $reference"
  ! grep -q OUT_OF_MEMORY "$home/$id.out" "$home/$id.err" || fail "job $id ran out of memory"
done
log "jobs $job_a and $job_b completed with the reference checksums"

# A guest (any user but root) sees its own job's name, not another user's.
view_a=$(runuser -u "$user_a" -- "$msched_cli" --socket "$socket" status --json)
names_a=$(echo "$view_a" | python3 -c 'import json, sys; print(" ".join(sorted(j["name"] or "(hidden)" for j in json.load(sys.stdin)["jobs"])))')
[ "$names_a" = "(hidden) slurm-$job_a" ] || fail "$user_a sees the jobs as: $names_a"

# ---- scancel ------------------------------------------------------------------
job_c=$(submit "$user_a" 100000000)
running_c() {
  local line
  line=$(status_json | jobs_in_status "$job_c" | sed -n 1p) || return 1
  read -r live state _ _ allocated pid_c <<<"$line"
  [ "$live" = 1 ] && [ "$state" = running ] && [ "$allocated" -ge "$foot" ]
}
until_true 60 "job $job_c to run and allocate under msched" running_c
log "job $job_c runs (pid $pid_c); $user_a cancels it"
runuser -u "$user_a" -- env -i PATH=/usr/bin:/bin SLURM_CONF="$SLURM_CONF" scancel "$job_c"
until_true 30 "job $job_c to end" job_ended "$job_c"
[ "$(job_field "$job_c" JobState)" = CANCELLED ] || fail "job $job_c ended $(job_field "$job_c" JobState)"
released() {
  local lines
  lines=$(status_json | jobs_in_status "$job_c") || return 1
  [ "$(echo "$lines" | sed -n 1p | cut -d' ' -f1-2)" = "0 finished" ] && ! kill -0 "$pid_c" 2>/dev/null
}
until_true 30 "the coordinator to release job $job_c" released
# Nothing live holds memory any more, by the coordinator's account.
status_json | python3 -c '
import json, sys
live = [j for j in json.load(sys.stdin)["jobs"] if j["state"] != "finished"]
held = sum(j["allocated_bytes"] + j["resident_bytes"] for j in live)
sys.exit(0 if not live and held == 0 else 1)
' || fail "the coordinator still counts live jobs after the scancel: $(status_json)"
log "job $job_c is killed and finished in msched status; no live job holds memory"

# ---- a setting the TaskProlog cannot use fails the job, saying why ----------
echo "ShardMem=${shard_mib}MiB" >"$tmp/etc/msched.conf"
job_d=$(submit "$user_b" 10)
until_true 30 "job $job_d to end" job_ended "$job_d"
[ "$(job_field "$job_d" JobState)" = FAILED ] || fail "job $job_d ended $(job_field "$job_d" JobState), not FAILED"
grep -q "^msched TaskProlog: .*unknown setting 'ShardMem'" "$tmp/home-b/$job_d.out" ||
  fail "job $job_d's output does not say why it failed: $(cat "$tmp/home-b/$job_d.out")"
! grep -q '^checksum ' "$tmp/home-b/$job_d.out" || fail "job $job_d ran despite the TaskProlog's failure"
log "a misspelt msched.conf failed job $job_d with the TaskProlog's message"

failed=0
log "PASS in $(($(date +%s) - start)) s"
