#!/usr/bin/env python3
"""A/B step times of two builds of the same plan, side by side in one run.

    python3 test/gpu/bench_ab.py WEFT_RUN --buckets decode_b1,decode_b16 \
        --contexts 512,4000 --rounds 2 NAME:A_PLAN:B_PLAN [NAME:A_PLAN:B_PLAN ...]

For every NAME, round, context and plan (A then B, interleaved so drift hits
both alike) runs `weft-run PLAN --random-weights --bench BUCKETS
--bench-context C --bench-steps N` (context 0: no --bench-context, for
prefill buckets) and prints its bucket lines; then one
markdown table: the step times of every round, and B / A of the means.
The column labels come from --labels (default "A,B").
"""
import argparse
import re
import statistics
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("pairs", nargs="+", help="NAME:A_PLAN:B_PLAN")
    ap.add_argument("--buckets", default="decode_b1")
    ap.add_argument("--contexts", default="512")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--labels", default="A,B")
    a = ap.parse_args()
    la, lb = a.labels.split(",")
    times = {}  # (name, bucket, context, side) -> [ms]
    line_re = re.compile(r"bucket (\S+): .*?([0-9.]+) ms/step")
    for r in range(1, a.rounds + 1):
        for pair in a.pairs:
            name, pa, pb = pair.split(":")
            for ctx in a.contexts.split(","):
                for side, plan in ((la, pa), (lb, pb)):
                    cmd = [a.run, plan, "--random-weights", "--quiet", "--bench", a.buckets,
                           "--bench-steps", str(a.steps)]
                    if ctx != "0":  # 0: prefill buckets, which take no context
                        cmd += ["--bench-context", ctx]
                    p = subprocess.run(cmd, capture_output=True, text=True)
                    if p.returncode != 0:
                        print(f"{name} {side} ctx={ctx}: weft-run failed: {p.stderr.strip()[-300:]}")
                        sys.exit(1)
                    for line in p.stdout.splitlines():
                        m = line_re.search(line)
                        if m:
                            print(f"{name} {side} ctx={ctx} round={r}: {line.strip()}", flush=True)
                            times.setdefault((name, m.group(1), ctx, side), []).append(float(m.group(2)))
    print()
    print(f"| weights | bucket | context | {la} ms | {lb} ms | {lb} / {la} |")
    print("|---|---|---|---|---|---|")
    for (name, bucket, ctx, side) in sorted(times):
        if side != la or (name, bucket, ctx, lb) not in times:
            continue
        ta, tb = times[(name, bucket, ctx, la)], times[(name, bucket, ctx, lb)]
        fmt = lambda v: ", ".join(f"{x:.3f}" for x in v)
        print(f"| {name} | {bucket} | {ctx} | {fmt(ta)} | {fmt(tb)} | "
              f"{statistics.mean(tb) / statistics.mean(ta):.3f} |")


if __name__ == "__main__":
    main()
