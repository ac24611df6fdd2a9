#!/usr/bin/env python3
"""Where one decode step goes, per kernel (Nsight Compute).

  python3 test/gpu/profile_step.py PLAN WEFT_RUN [BUCKET] [CONTEXT]

Runs `weft-run PLAN --bench BUCKET` step by step (no CUDA graphs) under
ncu, timing every kernel alone with the DRAM bytes it read, and prints the
last step's kernels grouped by name and grid: total and mean time, bytes
and the rate reached. Defaults: decode_b1 at context 512.
"""
import collections
import csv
import io
import subprocess
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    plan, run = sys.argv[1], sys.argv[2]
    bucket = sys.argv[3] if len(sys.argv) > 3 else "decode_b1"
    context = sys.argv[4] if len(sys.argv) > 4 else "512"
    cmd = ["ncu", "--metrics", "gpu__time_duration.sum,dram__bytes_read.sum", "--csv",
           "--cache-control", "none", "--clock-control", "none",
           run, plan, "--random-weights", "--quiet", "--no-cuda-graphs", "--bench", bucket,
           "--bench-steps", "2", "--bench-context", context]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = list(csv.reader(io.StringIO(out)))
    header, kernels = None, collections.OrderedDict()
    for r in rows:
        if r and r[0] == "ID":
            header = r
            continue
        if not header or len(r) != len(header):
            continue
        d = dict(zip(header, r))
        k = kernels.setdefault(d["ID"], {"name": d["Kernel Name"], "grid": d["Grid Size"]})
        k[d["Metric Name"]] = float(d["Metric Value"].replace(",", ""))
    kernels = list(kernels.values())
    starts = [i for i, k in enumerate(kernels) if k["name"].startswith("weft_embedding")]
    if not starts:
        sys.exit("profile_step: no embedding kernel: not a decode step")
    step = kernels[starts[-1]:]
    groups, total = collections.OrderedDict(), 0.0
    for k in step:
        us = k["gpu__time_duration.sum"] / 1000
        total += us
        name = k["name"].split("(")[0].rsplit("_", 1)[0] + " " + k["grid"]
        g = groups.setdefault(name, [0.0, 0.0, 0])
        g[0] += us
        g[1] += k["dram__bytes_read.sum"]
        g[2] += 1
    print(f"{bucket} at context {context}: {len(step)} kernels, {total:.1f} us in all")
    print("| kernel, grid | count | total us | mean us | MB read each | TB/s |")
    print("|---|---|---|---|---|---|")
    for name, (us, b, n) in sorted(groups.items(), key=lambda x: -x[1][0]):
        rate = b / (us * 1e-6) / 1e12 if us else 0
        print(f"| {name} | {n} | {us:.1f} | {us / n:.2f} | {b / 1e6 / n:.2f} | {rate:.2f} |")


if __name__ == "__main__":
    main()
