#!/usr/bin/env python3
"""Batch-1 decode benchmark of Llama 3.1 8B in FP16 on one GPU, side by side:
Weft (weft-run on a plan, random weights), Hugging Face transformers (eager
PyTorch, random weights) and the floor set by the measured device-to-device
copy bandwidth. Prints a table of ratios.

    python3 test/gpu/bench_decode.py PLAN WEFT_RUN
"""
import subprocess
import sys
import time

import torch
import transformers

WEIGHT_BYTES = 16.06e9  # Llama 3.1 8B fp16: read once per token


def copy_bandwidth():
    x = torch.empty(int(4e9) // 2, dtype=torch.float16, device="cuda")
    y = torch.empty_like(x)
    y.copy_(x)
    torch.cuda.synchronize()
    t0 = time.time()
    for _ in range(10):
        y.copy_(x)
    torch.cuda.synchronize()
    return 2 * x.numel() * 2 * 10 / (time.time() - t0)  # read + write


def weft(plan, runner, tokens=128, extra=()):
    prompt = ",".join(str(i) for i in range(1, 33))
    out = subprocess.run([runner, plan, "--random-weights", "--prompt-ids", prompt,
                          "--max-tokens", str(tokens), "--quiet", *extra],
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit("weft-run failed: " + out.stderr)
    line = [l for l in out.stdout.splitlines() if "ms/token" in l][0]
    return float(line.split(",")[-1].split("ms/token")[0].strip()) / 1e3, line


def hf(tokens=64):
    cfg = transformers.LlamaConfig(
        hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
        max_position_embeddings=131072)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(cfg).half().eval()
    ids = torch.arange(1, 33, device="cuda")[None]
    with torch.no_grad():
        model.generate(ids, max_new_tokens=8, do_sample=False, min_new_tokens=8)
        torch.cuda.synchronize()
        t0 = time.time()
        model.generate(ids, max_new_tokens=tokens, do_sample=False, min_new_tokens=tokens)
        torch.cuda.synchronize()
    return (time.time() - t0) / tokens


def main():
    plan, runner = sys.argv[1], sys.argv[2]
    bw = copy_bandwidth()
    floor = WEIGHT_BYTES / bw
    w, line = weft(plan, runner)
    w_nograph, line_nograph = weft(plan, runner, extra=("--no-cuda-graphs",))
    torch.cuda.empty_cache()
    h = hf()
    print(f"weft-run: {line}")
    print(f"weft-run --no-cuda-graphs: {line_nograph}")
    print("| batch-1 decode, Llama 3.1 8B fp16 | ms/token | tok/s | achieved GB/s | vs floor |")
    print("|---|---|---|---|---|")
    for name, t in [("floor (copy bandwidth %.2f TB/s)" % (bw / 1e12), floor),
                    ("Weft (CUDA graphs)", w), ("Weft (no graphs)", w_nograph),
                    ("HF transformers (eager)", h)]:
        print(f"| {name} | {t * 1e3:.2f} | {1 / t:.1f} | {WEIGHT_BYTES / t / 1e9:.0f} | {floor / t * 100:.1f}% |")
    print(f"Weft vs transformers: {h / w:.2f}x")


if __name__ == "__main__":
    main()
