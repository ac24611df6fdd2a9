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
import re
import sys
from collections import defaultdict

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
    w, h, left, right, top, bottom = 640, 380, 60, 150, 30, 50
    ymax = max(ms for _, _, pts in series for ms in pts.values()) * 1.1
    step = 2 if ymax < 30 else 5
    xs = {b: left + (w - left - right) * i / max(1, len(batches) - 1) for i, b in enumerate(batches)}
    y = lambda v: top + (h - top - bottom) * (1 - v / ymax)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{left}" y="18" font-size="14">Llama 3.1 8B quantized decode, one H200: '
           f'before (dashed), now (solid)</text>']
    for v in range(0, int(ymax) + 1, step):
        out.append(f'<line x1="{left}" x2="{w - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
                   f'stroke="#ddd"/><text x="{left - 8}" y="{y(v) + 4:.1f}" '
                   f'text-anchor="end">{v}</text>')
    for b in batches:
        out.append(f'<text x="{xs[b]:.1f}" y="{h - bottom + 18}" text-anchor="middle">{b}</text>')
    out.append(f'<text x="{(left + w - right) / 2}" y="{h - 12}" text-anchor="middle">'
               f'sequences in the step (decode bucket)</text>')
    out.append(f'<text x="16" y="{(top + h - bottom) / 2}" transform="rotate(-90 16 '
               f'{(top + h - bottom) / 2})" text-anchor="middle">ms per step</text>')
    legend = 0
    for fmt, dashed, pts in series:
        line = " ".join(f"{xs[b]:.1f},{y(ms):.1f}" for b, ms in sorted(pts.items()))
        dash = ' stroke-dasharray="5,4"' if dashed else ""
        out.append(f'<polyline points="{line}" fill="none" stroke="{COLORS[fmt]}" '
                   f'stroke-width="2"{dash}/>')
        if not dashed:
            ly = top + 20 + 22 * legend
            out.append(f'<line x1="{w - right + 12}" x2="{w - right + 36}" y1="{ly}" y2="{ly}" '
                       f'stroke="{COLORS[fmt]}" stroke-width="2"/><text x="{w - right + 42}" '
                       f'y="{ly + 4}">{NAMES[fmt]}</text>')
            legend += 1
    out.append("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
