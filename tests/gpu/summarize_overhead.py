"""Summarizes scripts/gpu-overhead.sh's runs as markdown on stdout.

Usage: python3 summarize_overhead.py WORK [WORK...]
Each WORK holds runs.tsv (repeat, program, mode, exit, wall s per line) and logs/
with each run's output (PROGRAM-MODE-REPEAT.out) and, under libmsched, its
statistics. Several WORKs (one per call of the script, numbered apart with its
--first-repeat) are summarized together.
"""
import hashlib
import json
import re
import statistics
import sys

MODES = ("none", "off", "msched")
# program: (what is measured, unit, how to read it from the output)
METRICS = {
    "launches": ("host time per empty launch", "ns", r"^launch ([0-9.]+) ns"),
    "train": ("median step, steps 150-299", "ms", r"^median step ([0-9.]+) ms"),
    "llama": ("median per token, tokens 3-64", "ms", None),
}


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def measure(prog, text):
    """The run's figure and a digest of what it computed (None where the program has none)."""
    if prog == "llama":
        for line in text.splitlines():
            if line.startswith("{"):
                doc = json.loads(line)
                return doc["token_ms_median"], doc["tokens_hash"]
        return None, None
    m = re.search(METRICS[prog][2], text, re.M)
    figure = float(m.group(1)) if m else None
    if prog == "train":
        losses = "\n".join(line for line in text.splitlines() if line.startswith("step "))
        return figure, hashlib.sha256(losses.encode()).hexdigest()[:16] if losses else None
    return figure, None


def stats_line(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return ""
    launches = doc.get("launches", {})
    alloc = doc.get("allocations", {})
    total = launches.get("total", 0)
    predicted = launches.get("predicted", 0)
    return (f"{predicted}/{total} launches predicted, {alloc.get('converted', 0)} allocations managed, "
            f"{doc.get('bytes', {}).get('prefetched', 0) / 2**20:.0f} MiB prefetched")


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: summarize_overhead.py WORK [WORK...]")
    runs = []
    for work in sys.argv[1:]:
        with open(f"{work}/runs.tsv") as f:
            for line in f:
                rep, prog, mode, rc, wall = line.rstrip("\n").split("\t")
                text = read(f"{work}/logs/{prog}-{mode}-{rep}.out")
                figure, digest = measure(prog, text)
                runs.append(dict(rep=int(rep), prog=prog, mode=mode, rc=int(rc), wall=float(wall), figure=figure,
                                 digest=digest, stats=stats_line(f"{work}/logs/{prog}-{mode}-{rep}.stats.json")))
    repeats = len({r["rep"] for r in runs})
    print(f"Method: {repeats} repeats (n in each cell: the runs it has); each repeat runs every program once in each "
          "mode, the order of the modes "
          "rotating by one from one repeat to the next (off, msched, none; then msched, none, off; ...), so slow drift "
          "falls on every mode alike. Modes: none (no libmsched), off (libmsched loaded, MSCHED_MODE=off), msched "
          "(MSCHED_MODE=msched, no MSCHED_GPU_MEMORY, MSCHED_COORD=off, the shipped templates). Figures are the "
          "median over the repeats; the ratio is that median over none's. Programs: `buffers_job launches 200000` "
          "(host time of the launch calls, bursts of 256 on a drained GPU), `train.py 300` (conv + MLP, AdamW, a "
          "Triton kernel each step), `llama.py 16 2048 64` (transformers LlamaForCausalLM, random fp16 weights, "
          "2.2 GB, greedy decode at batch 1).")
    print()
    print("| program | figure | none | off | msched | off / none | msched / none | outputs |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for prog, (what, unit, _) in METRICS.items():
        medians, counts = {}, {}
        for mode in MODES:
            values = [r["figure"] for r in runs if r["prog"] == prog and r["mode"] == mode and r["figure"] is not None]
            medians[mode] = statistics.median(values) if values else None
            counts[mode] = len(values)
        ref = {r["rep"]: r["digest"] for r in runs if r["prog"] == prog and r["mode"] == "none"}
        mine = [r for r in runs if r["prog"] == prog and r["mode"] != "none"]
        if prog == "launches":
            outputs = "(none to compare)"
        else:
            same = sum(1 for r in mine if r["digest"] is not None and r["digest"] in ref.values())
            first = next(iter(ref.values()), None)
            outputs = f"{same}/{len(mine)} runs equal none's" + (
                "" if len(set(ref.values())) <= 1 else " (none's own runs differ)") + (
                f" ({'losses' if prog == 'train' else 'tokens'} {first})" if first else "")

        def cell(mode):
            m = medians[mode]
            return "failed" if m is None else f"{m:.3f} {unit} (n={counts[mode]})"

        def ratio(mode):
            if medians[mode] is None or not medians["none"]:
                return "-"
            return f"{medians[mode] / medians['none']:.4f}"

        print(f"| {prog} | {what} | {cell('none')} | {cell('off')} | {cell('msched')} | {ratio('off')} | "
              f"{ratio('msched')} | {outputs} |")
    print()
    print("Every run, in the order it ran:")
    print()
    print("| repeat | program | mode | exit | wall s | figure | output digest | msched counters |")
    print("|---:|---|---|---:|---:|---:|---|---|")
    for r in runs:
        fig = "-" if r["figure"] is None else f"{r['figure']:.3f}"
        print(f"| {r['rep']} | {r['prog']} | {r['mode']} | {r['rc']} | {r['wall']:.2f} | {fig} | "
              f"{r['digest'] or '-'} | {r['stats'] or '-'} |")


if __name__ == "__main__":
    main()
