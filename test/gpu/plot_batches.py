#!/usr/bin/env python3
"""Draws the batched-decode table of bench_batches.py as an SVG: step time
against batch size for each context, each beside its bandwidth floor.

    python3 test/gpu/plot_batches.py RESULTS/bench.txt docs/images/batched-decode.svg
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svg_chart import Chart  # noqa: E402

COLORS = {80: "#1f77b4", 512: "#ff7f0e", 4000: "#2ca02c"}


def main():
    rows = []
    for line in open(sys.argv[1]):
        m = re.match(r"\| (\d+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \|", line)
        if m:
            rows.append((int(m.group(1)), int(m.group(2)), float(m.group(3)), float(m.group(4))))
    batches = sorted({r[0] for r in rows})
    chart = Chart("Llama 3.1 8B fp16 decode step on one H200: Weft (solid) and its bandwidth "
                  "floor (dashed)", batches, max(r[2] for r in rows) * 1.1, 5)
    for i, c in enumerate(sorted(COLORS)):
        pts = sorted((r[0], r[2], r[3]) for r in rows if r[1] == c)
        if not pts:
            continue
        chart.line([(b, ms) for b, ms, _ in pts], COLORS[c])
        chart.line([(b, f) for b, _, f in pts], COLORS[c], dashed=True, width=0)
        for b, ms, _ in pts:
            chart.out.append(f'<circle cx="{chart.xs[b]:.1f}" cy="{chart.y(ms):.1f}" r="3" '
                             f'fill="{COLORS[c]}"/>')
        chart.legend(i, COLORS[c], f"context {c}", indent=15)
    chart.write(sys.argv[2])


if __name__ == "__main__":
    main()
