"""Prints, from an mschedd --trace timeline, what each job's swaps moved, for
scripts/gpu-sharing.sh's report: one Markdown table row per job and direction
(swaps, bytes in all, smallest, median and largest swap). Usage:
python3 summarize_swaps.py TRACE.json

Swap-ins carry the bytes the job reported loading; swap-outs the drop in its
reported resident bytes (docs/tracing.md). Only the coordinator's swaps
count (those that name their job). A timeline cut short (a killed
coordinator leaves no closing bracket) is read as far as it goes."""
import json
import statistics
import sys


def read_events(path):
    with open(path) as f:
        text = f.read().rstrip()
    if not text.endswith("]"):
        text = text.rstrip(",") + "]"
    return json.loads(text)


def mb(n):
    return f"{n / 1e6:,.1f} MB"


def main():
    try:
        events = read_events(sys.argv[1])
    except (OSError, ValueError) as e:
        print(f"(no timeline: {e})")
        return
    # The coordinator's swaps name their job by id (and most by name too);
    # a job's own trace merged into the file has swaps without an id, which
    # are left out so that no swap counts twice.
    mine = [e for e in events if e.get("ph") == "X" and e.get("name") in ("swap-in", "swap-out")
            and "job" in e.get("args", {})]
    names = {e["args"]["job"]: e["args"]["name"] for e in mine if e["args"].get("name")}
    swaps = {}
    for e in mine:
        job = e["args"]["job"]
        key = (names.get(job, f"job {job}"), e["name"])
        swaps.setdefault(key, []).append(int(e["args"].get("bytes", 0)))
    print("| job | direction | swaps | bytes in all | smallest | median | largest |")
    print("|---|---|---:|---:|---:|---:|---:|")
    if not swaps:
        print("| (none) | | 0 | | | | |")
    for (job, direction), sizes in sorted(swaps.items()):
        print(f"| {job} | {direction} | {len(sizes)} | {mb(sum(sizes))} | {mb(min(sizes))} | "
              f"{mb(statistics.median(sizes))} | {mb(max(sizes))} |")


if __name__ == "__main__":
    main()
