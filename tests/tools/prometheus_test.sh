#!/usr/bin/env bash
# mschedd --metrics scraped by a real Prometheus server (Debian's
# `prometheus`, installed by scripts/setup.sh): mschedd serves /metrics on a
# free loopback port, Prometheus scrapes it every second, two simulated jobs
# that do not fit the GPU together take turns for a while, and Prometheus'
# HTTP API must show the target healthy (it parsed every scrape), the
# series with the values expected, and the shipped alert rules evaluating. Skipped (exit 77) only when the
# prometheus program is missing. Everything it starts is killed on exit.
#   prometheus_test.sh MSCHEDD LIBMSCHED MSIM_RUN SIM_LIB_DIR WORKLOADS_DIR
set -euo pipefail

if [ $# -ne 5 ]; then
  echo "usage: $0 MSCHEDD LIBMSCHED MSIM_RUN SIM_LIB_DIR WORKLOADS_DIR" >&2
  exit 2
fi
mschedd=$1 libmsched=$2 msim_run=$3 sim_lib_dir=$4 workloads=$5
if ! command -v prometheus >/dev/null; then
  echo "SKIP: no prometheus program (Debian package prometheus; scripts/setup.sh installs it)"
  exit 77
fi

tmp=$(mktemp -d)
device="prom$$"
pids=()
cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$status" -ne 0 ]; then
    for f in "$tmp"/mschedd.log "$tmp"/prometheus.log "$tmp"/job-*.out; do
      [ -f "$f" ] && { echo "---- $f"; tail -n 40 "$f"; }
    done
  fi
  rm -rf "$tmp"
  rm -f "/dev/shm/msim-$device"
}
trap cleanup EXIT

# Lines of the form "serving metrics at http://127.0.0.1:PORT/metrics".
"$mschedd" --socket "$tmp/gpu0.sock" --gpu-memory 64MiB --slice 5ms --log "$tmp/mschedd.log" \
  --metrics 127.0.0.1:0 &
pids+=($!)
metrics=""
for _ in $(seq 100); do
  metrics=$(sed -n 's|.*serving metrics at http://\(127\.0\.0\.1:[0-9]*\)/metrics.*|\1|p' "$tmp/mschedd.log" 2>/dev/null || true)
  [ -n "$metrics" ] && break
  sleep 0.1
done
[ -n "$metrics" ] || { echo "FAIL: mschedd did not start serving metrics"; exit 1; }

web=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The shipped alert rules (packaging/prometheus) are loaded and evaluated
# against the live series.
rules="$(cd "$(dirname "$0")/../../packaging/prometheus" && pwd)/msched-alerts.yml"
cat >"$tmp/prometheus.yml" <<EOF
rule_files: ['$rules']
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: mschedd
    static_configs:
      - targets: ['$metrics']
EOF
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
  --web.listen-address="127.0.0.1:$web" --log.level=warn >"$tmp/prometheus.log" 2>&1 &
pids+=($!)

# Two jobs of 40 MiB on 64 MiB take turns; one demand-pages (um), so that
# it reports faults.
for job in a b; do
  mode=msched
  [ "$job" = b ] && mode=um
  env LD_LIBRARY_PATH="$sim_lib_dir" LD_PRELOAD="$libmsched" MSIM_DEVICE="$device" MSIM_HBM_BYTES=$((64 << 20)) \
    MSCHED_SOCKET="$tmp/gpu0.sock" MSCHED_COORD=required MSCHED_TEMPLATES="$workloads/kernels" \
    MSCHED_JOB_NAME="prom-$job" MSCHED_MODE=$mode MSCHED_LOG_LEVEL=warn \
    "$msim_run" "$workloads/micro_vadd.json" --set FOOT=$((40 << 20)) --set TASKS=1000000 \
    >"$tmp/job-$job.out" 2>&1 &
  pids+=($!)
done

# Asks Prometheus until every check holds (45 s at most), then prints what
# it answered.
python3 - "$web" "$metrics" <<'PY'
import json
import sys
import time
import urllib.parse
import urllib.request

web, target = sys.argv[1], sys.argv[2]


def api(path, **params):
    url = f"http://127.0.0.1:{web}/api/v1/{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)


def query(q):
    return api("query", query=q)["data"]["result"]


def values(q):
    return {json.dumps(s["metric"], sort_keys=True): float(s["value"][1]) for s in query(q)}


checks = {
    # Prometheus parsed every scrape: a format error would show here.
    "target up and healthy": lambda: any(
        t["health"] == "up" and t["lastError"] == "" and t["labels"]["instance"] == target
        for t in api("targets")["data"]["activeTargets"]),
    'msched_jobs{state="running"} == 2': lambda: values('msched_jobs{state="running"}') and
        list(values('msched_jobs{state="running"}').values()) == [2.0],
    "two jobs with resident bytes > 0": lambda: len(values("msched_job_resident_bytes > 0")) == 2,
    "msched_switches_total rising": lambda: any(v > 0 for v in values("rate(msched_switches_total[5s])").values()),
    "msched_slice_seconds a histogram": lambda: len(values("histogram_quantile(0.5, msched_slice_seconds_bucket)")) == 1,
    'swap bytes in and out > 0': lambda: len(values("msched_swap_bytes_total > 0")) == 2,
    "faults reported": lambda: any(v > 0 for v in values("msched_faults_total").values()),
    "prefetched bytes reported": lambda: any(v > 0 for v in values("msched_prefetched_bytes_total").values()),
    "the shipped alert rules load and evaluate": lambda: (lambda groups: len(groups) >= 3 and all(
        r["health"] == "ok" for g in groups for r in g["rules"]))(api("rules")["data"]["groups"]),
    "no names published": lambda: all("name" not in s["metric"] for s in query("msched_job_resident_bytes")),
    # A label of ours that clashed with one Prometheus sets (job, instance)
    # would come back renamed exported_*.
    "no label renamed": lambda: query("msched_job_resident_bytes") and all(
        not k.startswith("exported_") for s in query('{__name__=~"msched_.+"}') for k in s["metric"]),
}
deadline = time.time() + 45
failing = list(checks)
while failing and time.time() < deadline:
    time.sleep(1)
    still = []
    for name in failing:
        try:
            ok = checks[name]()
        except Exception:  # Prometheus still starting, or no data yet
            ok = False
        if not ok:
            still.append(name)
    failing = still

for q in ['up{job="mschedd"}', 'msched_jobs', "msched_job_resident_bytes", "msched_switches_total",
          "rate(msched_switches_total[5s])", "histogram_quantile(0.5, msched_slice_seconds_bucket)",
          "msched_swap_bytes_total", "msched_faults_total", "msched_prefetched_bytes_total"]:
    try:
        result = query(q)
    except Exception as e:
        result = f"(no answer: {e})"
    print(f"{q} => " + (json.dumps([[s["metric"], s["value"][1]] for s in result])
                        if isinstance(result, list) else result))
if failing:
    print("FAIL: " + "; ".join(failing))
    sys.exit(1)
print(f"PASS: Prometheus scraped mschedd at {target}: {len(checks)} checks")
PY
