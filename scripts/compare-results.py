#!/usr/bin/env python3
"""Two benchmark runs side by side, row by row.

usage: scripts/compare-results.py BEFORE/results.csv AFTER/results.csv [--policy P] [--all]

Reads the results.csv that `msched bench` writes and prints, as a Markdown
table, each row of policy P (default msched) present in both: the time
before and after, their ratio (after / before: below 1 is faster), x
exclusive and % of ideal after, and bytes each way. Rows whose time moved
by less than 0.05% are left out unless --all is given; the count of rows
compared, changed, faster and slower comes last.
"""
import argparse
import csv


def rows(path, policy):
    out = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["policy"] == policy:
                out[(r["scenario"], int(r["percent"]))] = r
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--policy", default="msched")
    p.add_argument("--all", action="store_true")
    a = p.parse_args()
    before, after = rows(a.before, a.policy), rows(a.after, a.policy)
    print("| scenario | point | ms before | ms after | after / before | x exclusive after | % of ideal after "
          "| H2D GB before, after | D2H GB before, after |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---|")
    compared = changed = faster = slower = 0
    for key in sorted(before.keys() & after.keys(), key=lambda k: (k[0], k[1])):
        b, n = before[key], after[key]
        tb, tn = float(b["makespan_ns"]), float(n["makespan_ns"])
        if tb <= 0 or tn <= 0:
            continue
        compared += 1
        ratio = tn / tb
        moved = abs(ratio - 1) >= 0.0005
        changed += moved
        faster += ratio < 0.9995
        slower += ratio > 1.0005
        if not moved and not a.all:
            continue
        ex, ideal = float(n["speedup_vs_exclusive"] or 0), float(n["fraction_of_ideal"] or 0)
        ex_text = f"{ex:.2f}x" if ex > 0 else "-"  # 0: exclusive cannot run it
        ideal_text = f"{100 * ideal:.1f}" if ideal > 0 else "-"
        print(f"| {key[0]} | {key[1]}% | {tb / 1e6:.1f} | {tn / 1e6:.1f} | {ratio:.3f} | {ex_text} | {ideal_text} | "
              f"{int(b['h2d_bytes']) / 1e9:.2f}, {int(n['h2d_bytes']) / 1e9:.2f} | "
              f"{int(b['d2h_bytes']) / 1e9:.2f}, {int(n['d2h_bytes']) / 1e9:.2f} |")
    print(f"\n{compared} {a.policy} rows compared: {changed} changed by 0.05% or more, {faster} faster, {slower} slower.")


if __name__ == "__main__":
    main()
