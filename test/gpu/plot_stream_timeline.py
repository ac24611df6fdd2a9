#!/usr/bin/env python3
"""Draws where one layer's time goes in the batch-1 decode stream kernel as
an SVG, from the phase timelines in a results file (the median block's
events of one layer, test/gpu/results/attention-window-2026-12-04.txt,
run 4): one row per table, each phase cut into its steps (the input, the
weight stages, the columns, the release, the wait for the next phase's
input; attention's loop, merge, arrival and combine), coloured by kind so
that the time no weights flow stands out.

    python3 test/gpu/plot_stream_timeline.py RESULTS.txt OUT.svg LABEL [LABEL ...]

A LABEL is the line that heads a table in RESULTS.txt (e.g. "fp16, context
128:"); the rows under it are "| event | first | median | last | blocks |".
"""
import sys

# (step, from event, to event, kind) in layer order.
STEPS = [("QKV", "QKV input ready", "QKV first stage landed", "input"),
         ("QKV", "QKV first stage landed", "QKV stages done", "stages"),
         ("QKV", "QKV stages done", "QKV columns written", "columns"),
         ("QKV", "QKV columns written", "QKV released", "release"),
         ("attention", "QKV released", "attn: QKV seen", "wait"),
         ("attention", "attn: QKV seen", "attn: loop done", "attention"),
         ("attention", "attn: loop done", "attn: partial written", "attention"),
         ("attention", "attn: partial written", "attn: arrival counted", "release"),
         ("attention", "attn: arrival counted", "attn: combined + released (last split)", "release"),
         ("O", "attn: combined + released (last split)", "O input ready", "wait")]
for p, nxt in (("O", "gate/up"), ("gate/up", "down"), ("down", None)):
    STEPS += [(p, f"{p} input ready", f"{p} first stage landed", "input"),
              (p, f"{p} first stage landed", f"{p} stages done", "stages"),
              (p, f"{p} stages done", f"{p} columns written", "columns"),
              (p, f"{p} columns written", f"{p} released", "release")]
    if nxt:
        STEPS.append((nxt, f"{p} released", f"{nxt} input ready", "wait"))
COLORS = {"stages": "#2ca02c", "input": "#9ecae1", "columns": "#6baed6",
          "release": "#d62728", "wait": "#fdae6b", "attention": "#9467bd"}
NAMES = {"stages": "weight stages", "input": "input (norm, staging)", "columns": "columns",
         "release": "release / arrival (fence)", "wait": "wait for the phase's counter",
         "attention": "attention loop and merge"}


def read(path, label):
    """{event: median} of the table under the line `label`."""
    rows, on = {}, False
    with open(path) as f:
        for line in f:
            if line.strip() == label:
                on, rows = True, {}
                continue
            if on:
                if not line.startswith("| "):
                    break
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                try:
                    rows[cells[0]] = float(cells[2])
                except (IndexError, ValueError):
                    pass
    if not rows:
        sys.exit(f"plot_stream_timeline.py: no table under '{label}' in {path}")
    return rows


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    path, out, labels = sys.argv[1], sys.argv[2], sys.argv[3:]
    tables = [read(path, label) for label in labels]
    for label, t in zip(labels, tables):
        missing = sorted({e for _, a, b, _ in STEPS for e in (a, b) if e not in t})
        if missing:
            sys.exit(f"plot_stream_timeline.py: '{label}' lacks {', '.join(missing)}")
    end = max(t["down released"] for t in tables)
    W, L, R, ROW = 900, 200, 170, 60
    H = 60 + ROW * len(tables) + 90
    x = lambda us: L + us * (W - L - R) / (end * 1.02)  # noqa: E731
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
         f'font-family="sans-serif" font-size="12">', f'<rect width="{W}" height="{H}" fill="white"/>',
         '<text x="20" y="18" font-size="14">One Llama 3.1 8B layer at one token in the stream '
         'kernel, one H200: the median block\'s steps</text>']
    bottom = 40 + ROW * len(tables)
    for us in range(0, int(end) + 1, 10):
        o.append(f'<line x1="{x(us):.1f}" x2="{x(us):.1f}" y1="30" y2="{bottom}" stroke="#eee"/>'
                 f'<text x="{x(us):.1f}" y="{bottom + 14}" text-anchor="middle">{us}</text>')
    o.append(f'<text x="{(L + W - R) / 2}" y="{bottom + 30}" text-anchor="middle">'
             'us after the first block starts the layer\'s QKV phase</text>')
    for i, (label, t) in enumerate(zip(labels, tables)):
        y = 36 + ROW * i
        o.append(f'<text x="{L - 8}" y="{y + 15}" text-anchor="end">{label.rstrip(":")}</text>')
        totals = {}
        for phase, a, b, kind in STEPS:
            x0, x1 = x(t[a]), x(t[b])
            totals[kind] = totals.get(kind, 0.0) + t[b] - t[a]
            o.append(f'<rect x="{x0:.1f}" y="{y}" width="{max(0.5, x1 - x0):.1f}" height="20" '
                     f'fill="{COLORS[kind]}"><title>{phase}: {a} to {b}, '
                     f'{t[b] - t[a]:.2f} us</title></rect>')
        for k, phase in enumerate(("QKV", "attention", "O", "gate/up", "down")):
            spans = [(t[a], t[b]) for p, a, b, _ in STEPS if p == phase]
            mid = (min(s for s, _ in spans) + max(e for _, e in spans)) / 2
            o.append(f'<text x="{x(mid):.1f}" y="{y + 33 + 11 * (k % 2)}" text-anchor="middle" '
                     f'font-size="11">{phase}</text>')
        stalled = t["down released"] - totals["stages"]
        o.append(f'<text x="{x(t["down released"]) + 4:.1f}" y="{y + 15}" font-size="11">'
                 f'{t["down released"]:.0f} us, {stalled:.0f} without stages</text>')
    for i, kind in enumerate(("stages", "input", "columns", "release", "wait", "attention")):
        lx, ly = 20 + 290 * (i % 3), H - 40 + 18 * (i // 3)
        o.append(f'<rect x="{lx}" y="{ly}" width="12" height="12" fill="{COLORS[kind]}"/>'
                 f'<text x="{lx + 16}" y="{ly + 10}" font-size="11">{NAMES[kind]}</text>')
    o.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(o) + "\n")


if __name__ == "__main__":
    main()
