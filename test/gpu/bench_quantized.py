#!/usr/bin/env python3
"""Llama 3.1 8B with quantized projections beside fp16, on one GPU, in one
run: decode steps of 1, 16, 32, 64 and 100 sequences and a 512-token
prefill chunk, each decode step against its own bytes floor (the bytes a
step reads over the measured device-to-device copy bandwidth); then the
batched steps as a second table. make_plans.sh writes the plans:

  llama8b-fp16-bench.weft   fp16 weights
  llama8b-awq-bench.weft    4-bit codes, (scale, zero) per 128 inputs (AWQ)
  llama8b-gptq8-bench.weft  8-bit codes, one (scale, zero) per row (GPTQ)
  llama8b-fp8-bench.weft    FP8 E4M3 codes, one f32 scale per row
                            (weft-compile --weight-dtype fp8)
  llama8b-awq-head8-bench.weft, llama8b-awq-head4-bench.weft
                            AWQ with the LM head quantized too
                            (--lm-head-dtype int8 / int4); left out when
                            the directory lacks them

    python3 test/gpu/bench_quantized.py DIR WEFT_RUN
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_decode import copy_bandwidth  # noqa: E402

HIDDEN, FFN, LAYERS, HEADS, KV_HEADS, VOCAB = 4096, 14336, 32, 32, 8, 128256
HEAD_DIM = HIDDEN // HEADS
CONTEXT = 512
BATCHES = [1, 16, 32, 64, 100]
PROJECTIONS = [(HIDDEN, HIDDEN), (KV_HEADS * HEAD_DIM, HIDDEN), (KV_HEADS * HEAD_DIM, HIDDEN),
               (HIDDEN, HIDDEN), (FFN, HIDDEN), (FFN, HIDDEN), (HIDDEN, FFN)]  # (out, in)


def projection_bytes(kind):
    total = 0
    for out, inp in PROJECTIONS:
        if kind == "fp16":
            total += out * inp * 2
        elif kind == "awq":  # 4-bit codes, an f16 (scale, zero) pair per 128 inputs
            total += out * inp // 2 + out * (inp // 128) * 4
        elif kind in ("gptq8", "fp8"):  # 8-bit codes, one pair (f32 scale) per row
            total += out * inp + out * 4
    return total


def head_bytes(kind):
    """The LM head as stored: fp16, or (--lm-head-dtype) int8 codes with a
    16-bit (scale, zero) pair per row, int4 with one per 128 inputs."""
    if kind.endswith("-head8"):
        return VOCAB * HIDDEN + VOCAB * 4
    if kind.endswith("-head4"):
        return VOCAB * HIDDEN // 2 + VOCAB * (HIDDEN // 128) * 4
    return VOCAB * HIDDEN * 2


def step_bytes(kind, sequences):
    """Weights (the LM head as stored, one embedding row per token) and KV
    cache."""
    layers = kind.split("-")[0]
    weights = LAYERS * (projection_bytes(layers) + 2 * HIDDEN * 2) + head_bytes(kind) + HIDDEN * 2
    weights += sequences * HIDDEN * 2
    kv = sequences * CONTEXT * LAYERS * 2 * KV_HEADS * HEAD_DIM * 2
    return weights + kv


def bench(runner, plan):
    buckets = ",".join([f"decode_b{b}" for b in BATCHES] + ["prefill_c512"])
    out = subprocess.run([runner, plan, "--random-weights", "--bench", buckets,
                          "--bench-context", str(CONTEXT), "--bench-steps", "50"],
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"weft-run {plan} failed: {out.stderr.strip()}")
    times = {}
    for line in out.stdout.splitlines():
        if line.startswith("bucket "):
            name = line.split()[1].rstrip(":")
            times[name] = float(line.split(" ms/step")[0].split(", ")[-1]) / 1e3
            print("   ", line)
    return times


def main():
    plans, runner = sys.argv[1], sys.argv[2]
    bw = copy_bandwidth()
    rows = {}
    for kind in ["fp16", "awq", "gptq8", "fp8", "awq-head8", "awq-head4"]:
        plan = f"{plans}/llama8b-{kind}-bench.weft"
        if "-head" in kind and not os.path.exists(plan):
            continue
        print(f"{kind}:")
        rows[kind] = bench(runner, plan)
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s; floors: bytes a step reads (weights and LM "
          f"head as stored, KV cache at context {CONTEXT}) / bandwidth")
    print("| weights | batch 1 ms | tok/s | vs floor | vs fp16 | batch 100 ms | tok/s | vs floor "
          "| prefill 512 ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    names = {"fp16": "fp16", "awq": "int4, group 128 (AWQ)", "gptq8": "int8, per row (GPTQ)",
             "fp8": "fp8 e4m3, per row", "awq-head8": "int4 (AWQ), int8 LM head",
             "awq-head4": "int4 (AWQ), int4 LM head"}
    for kind, t in rows.items():
        f1, f100 = step_bytes(kind, 1) / bw, step_bytes(kind, 100) / bw
        b1, b100 = t["decode_b1"], t["decode_b100"]
        print(f"| {names[kind]} | {b1 * 1e3:.2f} | {1 / b1:.0f} | {f1 / b1 * 100:.0f}% "
              f"| {rows['fp16']['decode_b1'] / b1:.2f}x | {b100 * 1e3:.2f} | {100 / b100:.0f} "
              f"| {f100 / b100 * 100:.0f}% | {t['prefill_c512'] * 1e3:.2f} |")
    print()
    print("batched decode, ms/step (vs its floor):")
    print("| weights | " + " | ".join(f"batch {b}" for b in BATCHES) + " |")
    print("|---|" + "---|" * len(BATCHES))
    for kind, t in rows.items():
        cells = []
        for b in BATCHES:
            ms = t[f"decode_b{b}"]
            cells.append(f"{ms * 1e3:.2f} ({step_bytes(kind, b) / bw / ms * 100:.0f}%)")
        print(f"| {names[kind]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
