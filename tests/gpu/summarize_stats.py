"""Prints the non-zero counters of an MSCHED_STATS file on one line each, for
scripts/gpu-check.sh's report. Usage: python3 summarize_stats.py STATS.json [PREFIX...]
(only counters whose name starts with one of the prefixes, when given)."""
import json
import sys


def flatten(prefix, value, out):
    if isinstance(value, dict):
        for k, v in value.items():
            flatten(f"{prefix}.{k}" if prefix else k, v, out)
    elif isinstance(value, (int, float)) and value:
        out[prefix] = value


def main():
    try:
        with open(sys.argv[1]) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"(no statistics: {e})")
        return
    flat = {}
    flatten("", doc, flat)
    prefixes = tuple(sys.argv[2:])
    for name, value in sorted(flat.items()):
        if not prefixes or name.startswith(prefixes):
            print(f"{name} = {value}")


if __name__ == "__main__":
    main()
