#!/usr/bin/env python3
"""Draws the batched-decode table of bench_batches.py as an SVG: step time
against batch size for each context, each beside its bandwidth floor.

    python3 test/gpu/plot_batches.py RESULTS/bench.txt docs/images/batched-decode.svg
"""
import re
import sys

COLORS = {80: "#1f77b4", 512: "#ff7f0e", 4000: "#2ca02c"}


def main():
    rows = []
    for line in open(sys.argv[1]):
        m = re.match(r"\| (\d+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \|", line)
        if m:
            rows.append((int(m.group(1)), int(m.group(2)), float(m.group(3)), float(m.group(4))))
    batches = sorted({r[0] for r in rows})
    w, h, left, right, top, bottom = 640, 380, 60, 150, 30, 50
    ymax = max(r[2] for r in rows) * 1.1
    xs = {b: left + (w - left - right) * i / (len(batches) - 1) for i, b in enumerate(batches)}
    y = lambda v: top + (h - top - bottom) * (1 - v / ymax)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{left}" y="18" font-size="14">Llama 3.1 8B fp16 decode step on one H200: '
           f'Weft (solid) and its bandwidth floor (dashed)</text>']
    for v in range(0, int(ymax) + 1, 5):
        out.append(f'<line x1="{left}" x2="{w - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
                   f'stroke="#ddd"/><text x="{left - 8}" y="{y(v) + 4:.1f}" '
                   f'text-anchor="end">{v}</text>')
    for b in batches:
        out.append(f'<text x="{xs[b]:.1f}" y="{h - bottom + 18}" text-anchor="middle">{b}</text>')
    out.append(f'<text x="{(left + w - right) / 2}" y="{h - 12}" text-anchor="middle">'
               f'sequences in the step (decode bucket)</text>')
    out.append(f'<text x="16" y="{(top + h - bottom) / 2}" transform="rotate(-90 16 '
               f'{(top + h - bottom) / 2})" text-anchor="middle">ms per step</text>')
    for i, c in enumerate(sorted(COLORS)):
        pts = sorted((r[0], r[2], r[3]) for r in rows if r[1] == c)
        if not pts:
            continue
        line = " ".join(f"{xs[b]:.1f},{y(ms):.1f}" for b, ms, _ in pts)
        floor = " ".join(f"{xs[b]:.1f},{y(f):.1f}" for b, _, f in pts)
        out.append(f'<polyline points="{line}" fill="none" stroke="{COLORS[c]}" stroke-width="2"/>')
        out.append(f'<polyline points="{floor}" fill="none" stroke="{COLORS[c]}" '
                   f'stroke-dasharray="5,4"/>')
        for b, ms, _ in pts:
            out.append(f'<circle cx="{xs[b]:.1f}" cy="{y(ms):.1f}" r="3" fill="{COLORS[c]}"/>')
        ly = top + 20 + 22 * i
        out.append(f'<line x1="{w - right + 15}" x2="{w - right + 40}" y1="{ly}" y2="{ly}" '
                   f'stroke="{COLORS[c]}" stroke-width="2"/><text x="{w - right + 46}" '
                   f'y="{ly + 4}">context {c}</text>')
    out.append("</svg>")
    open(sys.argv[2], "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
