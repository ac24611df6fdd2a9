#!/usr/bin/env python3
"""Draws A/B step times of quantized plans as an SVG: decode step time
against batch size for each weight format, one compiler dashed and the
other solid.

    python3 test/gpu/plot_quantized.py RESULTS OUT.svg BEFORE NOW[,NOW2...]

RESULTS holds lines as the A/B scripts print them, after a header naming
the buckets in order:

    # buckets: decode_b1 decode_b16 ... prefill_c512
    r1 b0 awq: 2.426 ms/step 4.195 ms/step ...

BEFORE and NOW name plan variants (the second word); for each format the
first NOW variant present is drawn, every variant averaged over its rounds.
Buckets other than decode_bN are left out.
"""
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svg_chart import Chart  # noqa: E402

COLORS = {"awq": "#1f77b4", "gptq8": "#ff7f0e", "fp8": "#2ca02c", "fp16": "#7f7f7f"}
NAMES = {"awq": "AWQ int4", "gptq8": "GPTQ int8", "fp8": "FP8", "fp16": "fp16"}


def read(path):
    """{(variant, format): {batch: [ms, ...]}}"""
    times = defaultdict(lambda: defaultdict(list))
    buckets = []
    for line in open(path):
        if line.startswith("# buckets:"):
            buckets = line.split(":", 1)[1].split()
            continue
        m = re.match(r"r\d+ (\S+) (\S+): (.*ms/step)", line)
        if not m or not buckets:
            continue
        values = [float(v) for v in re.findall(r"([\d.]+) ms/step", m.group(3))]
        for bucket, ms in zip(buckets, values):
            b = re.fullmatch(r"decode_b(\d+)", bucket)
            if b:
                times[(m.group(1), m.group(2))][int(b.group(1))].append(ms)
    return times


def main():
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    times = read(sys.argv[1])
    before, nows = sys.argv[3], sys.argv[4].split(",")
    series = []  # (format, dashed, {batch: ms})
    for fmt in COLORS:
        if (before, fmt) not in times:
            continue
        now = next((v for v in nows if (v, fmt) in times), None)
        if now is None:
            continue
        for variant, dashed in ((before, True), (now, False)):
            pts = {b: sum(v) / len(v) for b, v in times[(variant, fmt)].items()}
            series.append((fmt, dashed, pts))
    if not series:
        raise SystemExit(f"{sys.argv[1]}: no rows of {before} and {sys.argv[4]} for one format")
    batches = sorted({b for _, _, pts in series for b in pts})
    ymax = max(ms for _, _, pts in series for ms in pts.values()) * 1.1
    chart = Chart("Llama 3.1 8B quantized decode, one H200: before (dashed), now (solid)",
                  batches, ymax, 2 if ymax < 30 else 5)
    legend = 0
    for fmt, dashed, pts in series:
        chart.line(sorted(pts.items()), COLORS[fmt], dashed=dashed)
        if not dashed:
            chart.legend(legend, COLORS[fmt], NAMES[fmt])
            legend += 1
    chart.write(sys.argv[2])


if __name__ == "__main__":
    main()
