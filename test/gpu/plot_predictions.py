#!/usr/bin/env python3
"""Draws quantized decode step times next to the plans' predictions as an
SVG: for each weight format, the measured step time (solid), the
prediction (dashed) and an earlier prediction (thin dashed) against the
batch size.

    python3 test/gpu/plot_predictions.py NOW.txt BEFORE.txt OUT.svg

NOW.txt and BEFORE.txt are outputs of bench_quantized.py: under a line
naming the format ("awq:"), one line per bucket as weft-run prints it
("bucket decode_b16: ... 4.151 ms/step ... predicted 4.186 ms ...").
Measured times come from NOW.txt; BEFORE.txt gives only its predictions.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svg_chart import Chart  # noqa: E402

FORMATS = [("awq", "AWQ int4", "#1f77b4"), ("gptq8", "GPTQ int8", "#ff7f0e"),
           ("fp8", "FP8", "#2ca02c")]
LINE = re.compile(r"bucket decode_b(\d+): .*?([0-9.]+) ms/step.*?predicted ([0-9.]+) ms")


def read(path):
    """{format: {batch: (measured, predicted)}} from a bench_quantized.py output."""
    out, fmt = {}, None
    with open(path) as f:
        for line in f:
            head = re.match(r"^(\w+):\s*$", line)
            if head:
                fmt = head.group(1)
                continue
            m = LINE.search(line)
            if fmt and m:
                out.setdefault(fmt, {})[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
    return out


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    now, before = read(sys.argv[1]), read(sys.argv[2])
    batches = sorted({b for f, _, _ in FORMATS for b in now.get(f, {})})
    if not batches:
        sys.exit(f"{sys.argv[1]}: no decode buckets of {', '.join(f for f, _, _ in FORMATS)}")
    top = max(v for f, _, _ in FORMATS for d in (now, before) for p in d.get(f, {}).values()
              for v in p)
    chart = Chart("Quantized decode, Llama 3.1 8B, one H200: measured and predicted",
                  batches, ymax=(int(top) // 2 + 1) * 2, step=2)
    row = 0
    for fmt, name, color in FORMATS:
        if fmt not in now:
            continue
        pts = sorted(now[fmt].items())
        chart.line([(b, m) for b, (m, _) in pts], color)
        chart.line([(b, p) for b, (_, p) in pts], color, dashed=True)
        if fmt in before:
            chart.line([(b, p) for b, (_, p) in sorted(before[fmt].items()) if b in chart.xs],
                       color, dashed=True, width=1)
        chart.legend(row, color, name)
        row += 1
    row += 1
    chart.legend(row, "#555", "measured")
    chart.legend(row + 1, "#555", "predicted", dashed=True)
    chart.legend(row + 2, "#555", "predicted before", dashed=True, width=1)
    chart.write(sys.argv[3])


if __name__ == "__main__":
    main()
