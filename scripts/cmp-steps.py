#!/usr/bin/env python3
"""Step medians of ENV_COMPARE reports against the main run's, point by point.

usage: cmp-steps.py MAIN.bench.json LABEL CMP.bench.json [LABEL CMP.bench.json ...]

For every (batch, context) point of a comparison report (`divm bench --out` JSON: Points
with Batch, Context, MedianMs), one line: the main report's median at that point, the
comparison's, their difference in ms and their ratio. scripts/gpu-bench.sh prints these
in its summary for each ENV_COMPARE set, labelled by the set; with DEEPINFER_CUDA_TWICE the
difference is the doubled kernel's cost inside the step's graph. A point the main report
lacks is said, not skipped; an unreadable report is an error (exit status 1).
"""
import json
import sys


def points(path):
    with open(path) as f:
        d = json.load(f)
    pts = d.get("Points") if isinstance(d, dict) else None
    if not isinstance(pts, list):
        raise ValueError("no Points list")
    return {(int(p["Batch"]), int(p["Context"])): float(p["MedianMs"]) for p in pts}


def main(argv):
    if len(argv) < 4 or len(argv) % 2 != 0:
        print("usage: cmp-steps.py MAIN.bench.json LABEL CMP.bench.json [LABEL CMP.bench.json ...]", file=sys.stderr)
        return 2
    try:
        base = points(argv[1])
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"cmp-steps: {argv[1]}: {e}", file=sys.stderr)
        return 1
    status = 0
    for label, path in zip(argv[2::2], argv[3::2]):
        try:
            cmp = points(path)
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"cmp-steps: {path}: {e}", file=sys.stderr)
            status = 1
            continue
        for (b, c), ms in sorted(cmp.items()):
            if (b, c) not in base:
                print(f"{label}: batch {b}, context {c}: {ms:.3f} ms (no such point in the main report)")
                continue
            m0 = base[(b, c)]
            print(f"{label}: batch {b}, context {c}: {m0:.3f} -> {ms:.3f} ms ({ms - m0:+.3f} ms, x{ms / m0:.3f})")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
