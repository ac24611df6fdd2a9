#!/usr/bin/env python3
"""Batched decode of Llama 3.1 8B fp16 next to its bandwidth floor, and the
scheduler against the bucket it runs, on the GPU machine:

    python3 test/gpu/bench_batches.py DIR [OUT]

DIR is what make_plans.sh wrote (llama8b-fp16-b100.weft, weft-run). One
weft-run process times every decode bucket at contexts 80, 512 and 4000
(each of the batch's sequences at that position, with its own KV pages)
and a 512-token prefill chunk. The floor of a step is the bytes it must
read over the copy bandwidth measured in the same run: every weight except
the embedding table (one row of it per token), plus each sequence's K and V
up to its position; or, where that is longer, the step's matrix FLOPs (every
projection for each token, attention over each sequence's positions) over
the fp16 GEMM peak measured by torch in the same run. A step faster than
its floor is a bug and is marked so.

Then `weft-run --prompts` serves 100 prompts of 32 tokens, 100 new tokens
each, through the scheduler, beside every bucket alone (same process), and
prints what the scheduler keeps: of decode_b100's throughput once every
prompt is done, end to end, and against the same steps run back to back by
the buckets alone.
"""
import os
import re
import subprocess
import sys
import tempfile

import torch

WEIGHTS = 16_060_522_496      # Llama 3.1 8B fp16, all tensors
EMBEDDING = 128_256 * 4096 * 2
KV_PER_POSITION = 32 * 8 * 128 * 2 * 2  # layers x kv heads x dim x (K,V) x bytes
LM_HEAD = 128_256 * 4096       # parameters of the output projection
LAYERS, HEADS, HEAD_DIM = 32, 32, 128
BUCKETS = [1, 8, 16, 32, 64, 100]
CONTEXTS = [80, 512, 4000]


def median_seconds(work):
    """Median time of `work()` over 20 timed runs after 5 warm-up runs."""
    times = []
    for i in range(25):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        work()
        e.record()
        torch.cuda.synchronize()
        if i >= 5:
            times.append(s.elapsed_time(e) / 1e3)
    times.sort()
    return times[len(times) // 2]


def copy_bandwidth():
    """Device-to-device copy of 2 GiB, bytes read + written, median of 20."""
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    seconds = median_seconds(lambda: b.copy_(a))
    del a, b
    torch.cuda.empty_cache()
    return 2 * n / seconds


def gemm_peak():
    """fp16 FLOP/s of an 8192^3 torch matmul, median of 20."""
    n = 8192
    a = torch.randn(n, n, dtype=torch.float16, device="cuda")
    b = torch.randn_like(a)
    seconds = median_seconds(lambda: a @ b)
    del a, b
    torch.cuda.empty_cache()
    return 2 * n ** 3 / seconds


def floor_ms(sequences, tokens, positions, logits, bw, peak):
    """The shortest a step can take: its bytes over the bandwidth, or its
    FLOPs over the GEMM peak, whichever is longer. `tokens` run through the
    projections, `logits` of them through the output head, and each token
    attends to `positions` K/V positions on average; `sequences` each
    read `positions` positions of KV."""
    weights = WEIGHTS - EMBEDDING  # one embedding row per token aside
    bytes_ = weights + sequences * positions * KV_PER_POSITION
    flops = (2 * (weights // 2 - LM_HEAD) * tokens + 2 * LM_HEAD * logits
             + 4 * LAYERS * HEADS * HEAD_DIM * positions * tokens)
    return max(bytes_ / bw, flops / peak) * 1e3


def main():
    d = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(d, "results")
    os.makedirs(out, exist_ok=True)
    run = os.path.join(d, "weft-run")
    plan = os.path.join(d, "llama8b-fp16-b100.weft")
    bw = copy_bandwidth()
    peak = gemm_peak()
    buckets = ",".join(f"decode_b{b}" for b in BUCKETS)
    cmd = [run, plan, "--random-weights", "--quiet", "--bench", buckets, "--bench-steps", "20",
           "--bench-context", ",".join(map(str, CONTEXTS))]
    r = subprocess.run(cmd, capture_output=True, text=True)
    open(os.path.join(out, "batches.txt"), "w").write(r.stdout + r.stderr)
    if r.returncode:
        print(r.stdout, r.stderr)
        sys.exit(1)
    pre = subprocess.run([run, plan, "--random-weights", "--quiet", "--bench", "prefill_c512"],
                         capture_output=True, text=True)
    rows = {}
    for line in (r.stdout + pre.stdout).splitlines():
        m = re.match(r"bucket (\S+): (\d+) tokens, ([\d.]+) ms/step, ([\d.]+) tokens/s .*context (\d+)",
                     line)
        if m:
            rows[(m.group(1), int(m.group(5)))] = float(m.group(3))
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s, fp16 GEMM peak {peak / 1e12:.0f} TFLOP/s")
    print("| batch | context | ms/step | floor ms | of floor | tok/s | tok/s per seq |")
    print("|---|---|---|---|---|---|---|")
    bad = 0
    for b in BUCKETS:
        for c in CONTEXTS:
            ms = rows.get((f"decode_b{b}", c))
            if ms is None:
                continue
            floor = floor_ms(b, b, c + 1, b, bw, peak)
            flag = "" if ms >= floor else " **faster than its floor: BUG**"
            bad += ms < floor
            print(f"| {b} | {c} | {ms:.2f} | {floor:.2f} | {floor / ms * 100:.0f}%{flag} | "
                  f"{b / ms * 1e3:,.0f} | {1e3 / ms:.0f} |")
    if ("prefill_c512", 512) in rows:
        # One sequence's first 512 positions: token i attends to i + 1 of
        # them (257 on average, rounded down), logits for the last one only.
        ms = rows[("prefill_c512", 512)]
        floor = floor_ms(1, 512, 256, 1, bw, peak)
        flag = "" if ms >= floor else " **faster than its floor: BUG**"
        bad += ms < floor
        print(f"| prefill 512 | 512 | {ms:.2f} | {floor:.2f} | {floor / ms * 100:.0f}%{flag} | "
              f"{512 / ms * 1e3:,.0f} | |")

    # The scheduler: 100 prompts of 32 tokens, 100 new tokens each.
    g = torch.Generator().manual_seed(100)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        for _ in range(100):
            f.write(",".join(map(str, torch.randint(3, 128000, (32,), generator=g).tolist())) + "\n")
        prompts = f.name
    names = [f"decode_b{b}" for b in BUCKETS] + ["prefill_c192", "prefill_c512"]
    s = subprocess.run([run, plan, "--random-weights", "--quiet", "--bench", ",".join(names),
                        "--bench-context", "80", "--bench-steps", "50", "--prompts", prompts,
                        "--max-tokens", "100"], capture_output=True, text=True)
    open(os.path.join(out, "serve.txt"), "w").write(s.stdout + s.stderr)
    if s.returncode:
        print(s.stdout[-2000:], s.stderr[-2000:])
        sys.exit(1)
    timed = {int(m.group(2)): float(m.group(3)) for m in re.finditer(
        r"bucket (decode_b|prefill_c)\d+: (\d+) tokens, ([\d.]+) ms/step", s.stdout)}
    thr = re.search(r"throughput ([\d.]+) generated tok/s; per sequence ([\d.]+) tok/s mean, "
                    r"([\d.]+) p10.*first token ([\d.]+) ms p50, ([\d.]+) ms max", s.stdout)
    total = re.search(r"generated tokens in ([\d.]+) s", s.stdout)
    phase = re.search(r"decode phase \(every prompt done\): (\d+) tokens in ([\d.]+) s, "
                      r"([\d.]+) generated tok/s", s.stdout)
    by_size = re.search(r"steps by size: (.*)", s.stdout)
    summary = [l for l in s.stdout.splitlines()
               if l.startswith(("loaded", "throughput", "decode phase", "steps by size"))]
    print("\n".join(summary))
    if 100 in timed and thr and total and phase and by_size:
        bucket_tps = 100 / timed[100] * 1e3
        # The same steps run back to back by the buckets alone (each timed
        # above at context 80): what the scheduler adds is the rest.
        steps = {int(k): int(v) for k, v in (x.split(":") for x in by_size.group(1).split())}
        alone = sum(n * timed[z] for z, n in steps.items() if z in timed) / 1e3
        untimed = [z for z in steps if z not in timed]
        seconds = float(total.group(1))
        print("| | tok/s | of decode_b100 alone |")
        print("|---|---|---|")
        print(f"| decode_b100 alone | {bucket_tps:,.0f} | 100% |")
        print(f"| scheduler, decode phase (every prompt done) | {float(phase.group(3)):,.0f} | "
              f"{float(phase.group(3)) / bucket_tps * 100:.1f}% |")
        print(f"| scheduler, end to end (with 3,200 prompt tokens) | {float(thr.group(1)):,.0f} | "
              f"{float(thr.group(1)) / bucket_tps * 100:.1f}% |")
        print(f"| per sequence: {float(thr.group(2)):.1f} tok/s mean, p10 {float(thr.group(3)):.1f}; "
              f"TTFT p50 {float(thr.group(4)):.0f} ms, max {float(thr.group(5)):.0f} ms | | |")
        print(f"| same steps run by the buckets alone: {alone:.3f} s against {seconds:.3f} s "
              f"through the scheduler ({alone / seconds * 100:.1f}% kept)"
              + (f"; sizes not timed: {untimed}" if untimed else "") + " | | |")
    if bad:
        print(f"{bad} rows faster than their floor")
        sys.exit(1)


if __name__ == "__main__":
    main()
