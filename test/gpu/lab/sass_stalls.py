#!/usr/bin/env python3
"""Where a kernel's warps stall, from Nsight Compute's sampled SASS.

    ncu --clock-control none -k regex:NAME --launch-skip 3 --launch-count 1 \\
        --section WarpStateStats --section SourceCounters -o R weft-run PLAN ...   (there)
    ncu --import R.ncu-rep --page source --print-source sass --csv > R.csv
    python3 test/gpu/lab/sass_stalls.py R.csv [TOP]

Prints the share of every stall reason over all warp samples, then the
loops that hold tensor-core instructions (runs of HMMA/HGMMA no more than
150 instructions apart, with 60 instructions before and 40 after) with
their share of the samples and their five main reasons, then the TOP (30)
most sampled instructions with their three main reasons.
"""
import collections
import csv
import re
import sys


def number(v):
    v = v.strip().replace(",", "")
    return float(v) if re.match(r"^-?[0-9.]+$", v) else 0.0


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    rows = list(csv.reader(open(sys.argv[1], newline="")))
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    at = next((i for i, r in enumerate(rows) if "Source" in (c.strip() for c in r)), None)
    if at is None:
        sys.exit(f"{sys.argv[1]}: no 'Source' column: not ncu's --page source --csv output")
    head = [c.strip() for c in rows[at]]
    data = [r for r in rows[at + 1:] if len(r) == len(head)]
    src = head.index("Source")
    if "Warp Stall Sampling (All Samples)" not in head:
        sys.exit(f"{sys.argv[1]}: no warp stall samples (profile with --section SourceCounters)")
    every = head.index("Warp Stall Sampling (All Samples)")
    reasons = [i for i, h in enumerate(head) if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(number(r[every]) for r in data) or 1.0

    def shares(lines):
        c = collections.Counter()
        for r in lines:
            for i in reasons:
                c[head[i]] += number(r[i])
        s = sum(number(r[every]) for r in lines) or 1.0
        return ", ".join(f"{k[6:]} {100 * v / s:.0f}%" for k, v in c.most_common(5) if v)

    print(f"{len(data)} instructions, {total:.0f} samples: {shares(data)}")
    mma = [i for i, r in enumerate(data) if re.search(r"\bH[G]?MMA", r[src])]
    loops = []
    for i in mma:
        if loops and i - loops[-1][1] < 150:
            loops[-1][1] = i
        else:
            loops.append([i, i])
    for a, b in loops:
        lines = data[max(0, a - 60):b + 40]
        s = sum(number(r[every]) for r in lines)
        n = sum(1 for r in data[a:b + 1] if re.search(r"\bH[G]?MMA", r[src]))
        print(f"loop at instruction {a} ({n} mma): {100 * s / total:.1f}% of samples: {shares(lines)}")
    for r in sorted(data, key=lambda r: -number(r[every]))[:top]:
        main3 = sorted(((number(r[i]), head[i][6:]) for i in reasons), reverse=True)[:3]
        print(f"{number(r[every]):8.0f}  {r[src].strip()[:64]:64s}  " +
              ", ".join(f"{h} {v:.0f}" for v, h in main3 if v))


if __name__ == "__main__":
    main()
