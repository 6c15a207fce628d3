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


def union_ns(spans, lo, hi):
    """Length of the union of (begin, end) spans clipped to [lo, hi)."""
    total, cur_b, cur_e = 0, None, None
    for b, e in sorted((max(b, lo), min(e, hi)) for b, e in spans if e > lo and b < hi):
        if cur_e is None or b > cur_e:
            if cur_e is not None:
                total += cur_e - cur_b
            cur_b, cur_e = b, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_b
    return total


def intersect(a, b):
    """Spans of the time both span lists cover (each list made disjoint first)."""
    def disjoint(spans):
        out = []
        for s, e in sorted(spans):
            if out and s <= out[-1][1]:
                out[-1][1] = max(out[-1][1], e)
            else:
                out.append([s, e])
        return out
    a, b = disjoint(a), disjoint(b)
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
    out, t = [], lo
    for s, e in sorted(spans):
        if s > t:
            out.append((t, min(s, hi)))
        t = max(t, e)
    if t < hi:
        out.append((t, hi))
    return [(s, e) for s, e in out if e > s]


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
        for i, (lo, hi) in enumerate(windows):
            def busy(tid):
                spans = [(b, e) for b, e, _, _ in tracks[tid]]
                moved = sum(n for b, e, n, _ in tracks[tid] if lo <= b < hi)
                return union_ns(spans, lo, hi), moved
            c, _ = busy(COMPUTE)
            h, hb = busy(TO_DEVICE)
            d, db = busy(TO_HOST)
            f, fb = busy(FAULTS)
            compute_spans = [(b, e) for b, e, _, _ in tracks[COMPUTE]]
            load_spans = [(b, e) for b, e, _, _ in tracks[TO_DEVICE]]
            compute_idle = complement(compute_spans, lo, hi)
            idle_loading = union_ns(intersect(compute_idle, load_spans), lo, hi)
            idle_both = union_ns(intersect(compute_idle, complement(load_spans, lo, hi)), lo, hi)
            evict_spans = [(b, e) for b, e, _, _ in tracks[TO_HOST]]
            evicting_only = union_ns(intersect(complement(load_spans, lo, hi), evict_spans), lo, hi)
            ms = lambda ns: f"{ns / 1e6:.1f}"
            print(f"| {pid} | {i} | {ms(hi - lo)} | {ms(c)} | {ms(h)} ({hb / 1e9:.2f}) | {ms(d)} ({db / 1e9:.2f}) "
                  f"| {ms(f)} ({fb / 1e9:.2f}) | {ms(idle_loading)} | {ms(idle_both)} | {ms(evicting_only)} |")


if __name__ == "__main__":
    main()
