#!/usr/bin/env python3
"""What the simulated device's engines did, from a timeline with its tracks.

usage: scripts/device-engines.py TIMELINE.json [--ops-per-window N]

TIMELINE.json is a run's timeline from `msched bench --trace DIR` (or any
timeline holding the tracks MSIM_TRACE writes, docs/simulator.md). For each
job (process id), and for each window of N compute operations if asked (a
training step, a decoded token), prints how long each engine worked and
what it moved: the compute engine (kernels, copies and memsets on the
device), the link to the device and the link to the host; then how much of
the window the compute engine waited while the link to the device worked
(loads not hidden under kernels), while neither worked, and how much the
link to the device stood idle while the link to the host worked (loads
that may wait for the space evictions free).
"""
import argparse
import json
import sys
from collections import defaultdict

# msched/trace_layout.h
COMPUTE, TO_DEVICE, TO_HOST, FAULTS = 4, 5, 6, 7


def merged(spans):
    """The (begin, end) spans as sorted, disjoint ones covering the same time."""
    out = []
    for b, e in sorted(spans):
        if out and b <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((b, e))
    return out


def length(spans, lo, hi):
    """Time that disjoint spans cover within [lo, hi)."""
    return sum(max(0, min(e, hi) - max(b, lo)) for b, e in spans)


def intersect(a, b):
    """The time two lists of disjoint, sorted spans both cover."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def complement(spans, lo, hi):
    """The time within [lo, hi) that disjoint, sorted spans leave free."""
    out, t = [], lo
    for b, e in spans:
        if b > t:
            out.append((t, min(b, hi)))
        t = max(t, e)
    if t < hi:
        out.append((t, hi))
    return [(b, e) for b, e in out if e > b]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("timeline")
    ap.add_argument("--ops-per-window", type=int, default=0,
                    help="split each job's run into windows of this many compute operations")
    args = ap.parse_args()
    try:
        with open(args.timeline) as f:
            text = f.read().rstrip()
        events = json.loads(text if text.endswith("]") else text + "]")
    except (OSError, ValueError) as e:
        sys.exit(f"device-engines.py: cannot read {args.timeline}: {e}")

    jobs = defaultdict(lambda: defaultdict(list))  # pid -> tid -> [(begin, end, bytes, ops)]
    for e in events:
        if e.get("ph") != "X" or e.get("cat") != "msim":
            continue
        b = round(e["ts"] * 1000)
        a = e.get("args", {})
        jobs[e["pid"]][e["tid"]].append((b, b + round(e["dur"] * 1000), a.get("bytes", 0), a.get("operations", 0)))
    if not jobs:
        sys.exit("device-engines.py: no device tracks in the timeline (run msched bench with --trace, "
                 "or the program with MSIM_TRACE)")

    print("Per job and window: ms each engine worked (GB moved); compute waiting while loads ran; both idle.")
    print("| job | window | ms | compute ms | to device ms (GB) | to host ms (GB) | fault stalls ms (GB) "
          "| compute idle, loading ms | compute and loads idle ms | loads idle, evicting ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for pid, tracks in sorted(jobs.items()):
        compute = sorted(tracks[COMPUTE])
        if not compute:
            continue
        windows = []
        if args.ops_per_window > 0:
            ops, start = 0, compute[0][0]
            for b, e, _, n in compute:
                ops += n
                if ops >= args.ops_per_window:
                    windows.append((start, e))
                    ops, start = 0, e
            if ops:
                windows.append((start, compute[-1][1]))
        else:
            windows = [(compute[0][0], compute[-1][1])]
        busy = {tid: merged((b, e) for b, e, _, _ in tracks[tid]) for tid in (COMPUTE, TO_DEVICE, TO_HOST, FAULTS)}
        for i, (lo, hi) in enumerate(windows):
            def moved(tid):
                return sum(n for b, _, n, _ in tracks[tid] if lo <= b < hi)
            no_loads = complement(busy[TO_DEVICE], lo, hi)
            compute_idle = complement(busy[COMPUTE], lo, hi)
            idle_loading = length(intersect(compute_idle, busy[TO_DEVICE]), lo, hi)
            idle_both = length(intersect(compute_idle, no_loads), lo, hi)
            evicting_only = length(intersect(no_loads, busy[TO_HOST]), lo, hi)
            ms = lambda ns: f"{ns / 1e6:.1f}"
            print(f"| {pid} | {i} | {ms(hi - lo)} | {ms(length(busy[COMPUTE], lo, hi))} "
                  f"| {ms(length(busy[TO_DEVICE], lo, hi))} ({moved(TO_DEVICE) / 1e9:.2f}) "
                  f"| {ms(length(busy[TO_HOST], lo, hi))} ({moved(TO_HOST) / 1e9:.2f}) "
                  f"| {ms(length(busy[FAULTS], lo, hi))} ({moved(FAULTS) / 1e9:.2f}) "
                  f"| {ms(idle_loading)} | {ms(idle_both)} | {ms(evicting_only)} |")

if __name__ == "__main__":
    main()
