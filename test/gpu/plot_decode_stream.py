#!/usr/bin/env python3
"""Batch-1 decode step against the context: the plan's kernel per region,
the decode stream kernel, and the bandwidth floor, as an SVG.

    python3 test/gpu/plot_decode_stream.py RESULTS.txt RUN OUT.svg

RESULTS.txt is test/gpu/results/decode-stream-2026-12-04.txt; RUN picks the
section that starts with "Run RUN " and must hold bench_decode.py's floor
line and bench_ab.py's table (kernels, stream) for one plan. The floor at
context C is the floor's weight bytes plus C positions of KV cache
(layers x KV heads x head_dim x K and V x 2 bytes, Llama 3.1 8B: 131072
bytes a position) over the copy bandwidth measured in the same run.
"""
import re
import sys

from svg_chart import Chart

KV_BYTES_PER_POSITION = 32 * 8 * 128 * 2 * 2
# bench_decode.py's floor counts the KV cache of its run: a 32-token prompt
# and 127 decode steps, on average about 96 positions.
BENCH_DECODE_POSITIONS = 32 + 127 / 2


def section(text, run):
    start = re.search(rf"^Run {run} ", text, re.M)
    if not start:
        sys.exit(f"no 'Run {run} ' section")
    end = re.search(r"^Run \d+ ", text[start.end():], re.M)
    return text[start.start():start.end() + end.start() if end else len(text)]


def main():
    text = open(sys.argv[1]).read()
    part = section(text, sys.argv[2])
    floor = re.search(r"floor: ([0-9.]+) GB per token .* over ([0-9.]+) TB/s", part)
    if not floor:
        sys.exit("no floor line in that run")
    gb, tbs = float(floor.group(1)), float(floor.group(2))
    weights = gb * 1e9 - BENCH_DECODE_POSITIONS * KV_BYTES_PER_POSITION
    rows = re.findall(r"^\| \S+ \| decode_b1 \| (\d+) \| ([0-9., ]+) \| ([0-9., ]+) \|", part, re.M)
    if not rows:
        sys.exit("no bench_ab.py table in that run")
    mean = lambda s: sum(float(v) for v in s.split(",")) / len(s.split(","))
    data = sorted((int(c), mean(a), mean(b)) for c, a, b in rows)
    contexts = [c for c, _, _ in data]
    floor_ms = {c: (weights + c * KV_BYTES_PER_POSITION) / (tbs * 1e12) * 1e3 for c in contexts}
    chart = Chart("Llama 3.1 8B fp16, batch-1 decode step on one H200", contexts, 4.8, 0.2,
                  xlabel="positions attended (context)", ymin=3.4)
    chart.line([(c, a) for c, a, _ in data], "#888")
    chart.line([(c, b) for c, _, b in data], "#1f77b4", width=3)
    chart.line([(c, floor_ms[c]) for c in contexts], "#2ca02c", dashed=True)
    chart.legend(0, "#888", "kernel per region")
    chart.legend(1, "#1f77b4", "stream kernel", width=3)
    chart.legend(2, "#2ca02c", "floor", dashed=True)
    for c, _, b in data:
        chart.out.append(f'<text x="{chart.xs[c]:.1f}" y="{chart.y(b) + 18:.1f}" '
                         f'text-anchor="middle" fill="#1f77b4">{floor_ms[c] / b:.0%}</text>')
    chart.write(sys.argv[3])
    for c, a, b in data:
        print(f"context {c}: kernels {a:.3f} ms, stream {b:.3f} ms, floor {floor_ms[c]:.3f} ms "
              f"({floor_ms[c] / b:.1%} of it)")


if __name__ == "__main__":
    main()
