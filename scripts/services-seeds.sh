#!/usr/bin/env bash
# services-seeds.sh: the services scenario over several request traces, so
# that a change to how services share the GPU is judged by more than the one
# trace the suite runs (a p99 of 60 requests is its worst request).
# Writes bench/results/services-seeds-<date>.md.
#
#   scripts/services-seeds.sh [--build DIR] [--seeds "1 2 ..."] [--out FILE]
#
# For each seed (default 1 to 9; the suite's own scenario uses 5), runs
# bench/scenarios/services.json with that SEED, under the model-swapping
# server and msched (full form, `msched bench --scenarios`), and tabulates
# both policies' median and p99 request latency and share within the SLO.
set -u -o pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=$repo/build
seeds="1 2 3 4 5 6 7 8 9"
out=$repo/bench/results/services-seeds-$(date +%Y-%m-%d).md
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "services-seeds.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -x "$build/tools/msched" ] || { echo "services-seeds.sh: $build/tools/msched is missing; build first (README)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir "$work/scenarios"
for seed in $seeds; do
  python3 - "$repo/bench/scenarios/services.json" "$work/scenarios/services-seed$seed.json" "$seed" <<'EOF' || exit 2
import json, sys
src, dst, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = json.load(open(src))
s["name"] = "services-seed%d" % seed
s["order"] = seed
s["jobs"][0]["vars"]["SEED"] = seed
json.dump(s, open(dst, "w"), indent=1)
EOF
done

start=$(date +%s)
if ! "$build/tools/msched" bench --scenarios "$work/scenarios" --policies swap,msched --out "$work/out" \
    >"$work/bench.log" 2>&1; then
  tail -20 "$work/bench.log" >&2
  echo "services-seeds.sh: msched bench failed" >&2
  exit 1
fi
wall=$(($(date +%s) - start))

mkdir -p "$(dirname "$out")"
commit=$(git -C "$repo" rev-parse --short HEAD)
# Benchmark outputs (bench/results) do not change what was run.
[ -n "$(git -C "$repo" status --porcelain --untracked-files=no -- . ':!bench/results')" ] &&
  commit="$commit with uncommitted changes"
python3 - "$work/out/results.csv" "$out" "$wall" "$commit" <<'EOF'
import csv, sys, datetime
rows, out, wall, commit = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
by = {}
for r in csv.DictReader(open(rows)):
    by.setdefault(int(r["scenario"].rsplit("seed", 1)[1]), {})[r["policy"]] = r
ms = lambda r, k: int(r[k]) / 1e6
lines = [
    "# The services scenario over several request traces (%s, commit %s)" % (datetime.date.today(), commit),
    "",
    "Method: `scripts/services-seeds.sh` ran `bench/scenarios/services.json` (full form: three LLM services",
    "of 40% of a 4 GiB simulated GPU, 60 requests at 1 per second over the three models) once per seed of",
    "its request trace, under the model-swapping server (`swap`, at most two models loaded, answering in",
    "arrival order) and under msched, with `msched bench --scenarios DIR --policies swap,msched`. Latency",
    "counts from a request's arrival to its last token on the device clock; p99 (nearest rank) of 60",
    "requests is the worst one. Simulated times repeat exactly from run to run. %s s of wall time." % wall,
    "",
    "| seed | swap p50 ms | msched p50 ms | swap p99 ms | msched p99 ms | msched p99 x swap | within SLO: swap, msched |",
    "|---:|---:|---:|---:|---:|---:|---|",
]
met = 0
for seed in sorted(by):
    s, m = by[seed]["swap"], by[seed]["msched"]
    ratio = ms(m, "latency_p99_ns") / ms(s, "latency_p99_ns")
    met += ratio <= 1.0
    lines.append("| %d | %.1f | %.1f | %.1f | %.1f | %.2fx | %.1f%%, %.1f%% |" % (
        seed, ms(s, "latency_p50_ns"), ms(m, "latency_p50_ns"), ms(s, "latency_p99_ns"),
        ms(m, "latency_p99_ns"), ratio, 100 * float(s["slo_met"]), 100 * float(m["slo_met"])))
lines += ["", "msched's p99 is at most the swap server's for %d of %d traces." % (met, len(by)), ""]
open(out, "w").write("\n".join(lines))
print("\n".join(lines))
EOF
