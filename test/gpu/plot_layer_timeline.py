#!/usr/bin/env python3
"""Draws one layer's timeline from test/gpu/lab/layer_stream_lab.cu as an
SVG: for each phase of the persistent stream kernel (QKV, attention, O,
gate/up, down) a bar from the first block's start to the last block's end,
its darker part ending where the first block finished; below, the same
projections' bytes back to back at the plain streaming read's rate, the
layer's floor.

    python3 test/gpu/plot_layer_timeline.py RESULTS.txt LABEL OUT.svg [TB/s]

LABEL picks the timeline table whose header contains it (the last such
table); TB/s is the read rate of the floor row (default 4.45, the lab's
one-kernel plain read).
"""
import sys

PHASES = [  # name, start event, first-end event, end event, MB of weights
    ("QKV", "QKV input ready", "QKV written", "QKV written", 50.33),
    ("attention", "attention start", "attention partial written",
     "attention combined (last split)", 0.0),
    ("O", "O input ready", "O written", "O written", 33.55),
    ("gate/up", "gate/up input ready", "gate/up written", "gate/up written", 234.88),
    ("down", "down input ready", "down written", "down written", 117.44),
]
COLORS = {"QKV": "#1f77b4", "attention": "#d62728", "O": "#ff7f0e", "gate/up": "#2ca02c",
          "down": "#9467bd"}


def read(path, label):
    """{event: (first, last)} of the last timeline table whose header has label."""
    tables, cur = [], None
    with open(path) as f:
        for line in f:
            if line.startswith("| layer ") and ": event |" in line:
                cur = {} if label in line else None
                if cur is not None:
                    tables.append(cur)
            elif cur is not None and line.startswith("| ") and not line.startswith("|---"):
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if len(cells) >= 3:
                    try:
                        cur[cells[0]] = (float(cells[1]), float(cells[2]))
                    except ValueError:
                        cur = None
            elif cur is not None and not line.strip():
                cur = None
    if not tables:
        sys.exit(f"plot_layer_timeline.py: no timeline table labelled '{label}' in {path}")
    return tables[-1]


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    path, label, out = sys.argv[1:4]
    rate = float(sys.argv[4]) if len(sys.argv) > 4 else 4.45
    t = read(path, label)
    missing = [e for _, a, b, c, _ in PHASES for e in (a, b, c) if e not in t]
    if missing:
        sys.exit(f"plot_layer_timeline.py: {path}: the table lacks {', '.join(sorted(set(missing)))}")
    end = max(t[c][1] for _, _, _, c, _ in PHASES)
    W, H, L, R = 800, 210, 150, 20
    scale = (W - L - R) / (end * 1.02)
    x = lambda us: L + us * scale  # noqa: E731
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
         f'font-family="sans-serif" font-size="12">', f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="20" y="18" font-size="14">One Llama 3.1 8B fp16 layer at one token in the '
         f'stream kernel, one H200 ({label})</text>']
    for us in range(0, int(end) + 1, 10):
        o.append(f'<line x1="{x(us):.1f}" x2="{x(us):.1f}" y1="32" y2="{H - 40}" stroke="#eee"/>'
                 f'<text x="{x(us):.1f}" y="{H - 26}" text-anchor="middle">{us}</text>')
    o.append(f'<text x="{(L + W - R) / 2}" y="{H - 8}" text-anchor="middle">'
             f'us after the first block starts QKV</text>')
    y = 44
    o.append(f'<text x="{L - 8}" y="{y + 14}" text-anchor="end">measured</text>')
    for name, a, b, c, _ in PHASES:
        start, firstEnd, lastEnd = t[a][0], t[b][0], t[c][1]
        col = COLORS[name]
        o.append(f'<rect x="{x(start):.1f}" y="{y}" width="{x(firstEnd) - x(start):.1f}" '
                 f'height="20" fill="{col}"/>')
        o.append(f'<rect x="{x(firstEnd):.1f}" y="{y}" width="{max(0.5, x(lastEnd) - x(firstEnd)):.1f}" '
                 f'height="20" fill="{col}" fill-opacity="0.35"/>')
        o.append(f'<text x="{(x(start) + x(lastEnd)) / 2:.1f}" y="{y + 36}" text-anchor="middle">'
                 f'{name}</text>')
    y = 110
    o.append(f'<text x="{L - 8}" y="{y + 14}" text-anchor="end">read at {rate} TB/s</text>')
    at = 0.0
    for name, _, _, _, mb in PHASES:
        if not mb:
            continue
        us = mb / rate
        o.append(f'<rect x="{x(at):.1f}" y="{y}" width="{x(at + us) - x(at):.1f}" height="20" '
                 f'fill="{COLORS[name]}" fill-opacity="0.8"/>')
        at += us
    o.append(f'<text x="{x(at) + 6:.1f}" y="{y + 14}">{at:.1f} us</text>')
    o.append(f'<text x="{x(end) - 4:.1f}" y="{44 - 4}" text-anchor="end">{end:.1f} us</text>')
    o.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(o) + "\n")


if __name__ == "__main__":
    main()
