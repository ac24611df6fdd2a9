#!/usr/bin/env python3
"""Batch-1 decode benchmark of Llama 3.1 8B in FP16 on one GPU, side by side:
Weft (weft-run on a plan, random weights; with and without programmatic
dependent launch and CUDA graphs), Hugging Face transformers (eager PyTorch,
random weights) and the floor. Prints a table of ratios.

The floor is the bytes one decode token must read over the measured
device-to-device copy bandwidth: every weight except the embedding table,
of which one row is read, plus the KV cache of the positions attended
(averaged over the decode steps).

    python3 test/gpu/bench_decode.py PLAN WEFT_RUN
"""
import subprocess
import sys
import time

import torch
import transformers

# Llama 3.1 8B, fp16.
HIDDEN, FFN, LAYERS, HEADS, KV_HEADS, VOCAB = 4096, 14336, 32, 32, 8, 128256
HEAD_DIM = HIDDEN // HEADS
PROMPT, NEW_TOKENS = 32, 128


def token_bytes():
    """Bytes one decode step reads: weights (one embedding row) and KV cache."""
    layer = (HIDDEN * HIDDEN * 2                     # q, o
             + HIDDEN * KV_HEADS * HEAD_DIM * 2      # k, v
             + HIDDEN * FFN * 3                      # gate, up, down
             + HIDDEN * 2)                           # two norms
    weights = (LAYERS * layer + VOCAB * HIDDEN + HIDDEN + HIDDEN) * 2  # + head, final norm, 1 row
    kv_per_position = LAYERS * 2 * KV_HEADS * HEAD_DIM * 2
    mean_context = PROMPT + NEW_TOKENS / 2
    return weights + kv_per_position * mean_context


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


def weft(plan, runner, tokens=NEW_TOKENS, extra=()):
    prompt = ",".join(str(i) for i in range(1, PROMPT + 1))
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
    ids = torch.arange(1, PROMPT + 1, device="cuda")[None]
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
    nbytes = token_bytes()
    floor = nbytes / bw
    runs = [("Weft (graphs, programmatic launch)", ()),
            ("Weft (graphs, no programmatic launch)", ("--no-programmatic-launch",)),
            ("Weft (no graphs)", ("--no-cuda-graphs",))]
    results = []
    for name, extra in runs:
        t, line = weft(plan, runner, extra=extra)
        print(f"weft-run {' '.join(extra)}: {line}")
        results.append((name, t))
    torch.cuda.empty_cache()
    h = hf()
    print(f"floor: {nbytes / 1e9:.2f} GB per token (weights without the embedding table, "
          f"one row of it, KV cache) over {bw / 1e12:.2f} TB/s")
    print("| batch-1 decode, Llama 3.1 8B fp16 | ms/token | tok/s | achieved GB/s | vs floor |")
    print("|---|---|---|---|---|")
    for name, t in [("floor (copy bandwidth %.2f TB/s)" % (bw / 1e12), floor), *results,
                    ("HF transformers (eager)", h)]:
        print(f"| {name} | {t * 1e3:.2f} | {1 / t:.1f} | {nbytes / t / 1e9:.0f} | {floor / t * 100:.1f}% |")
    print(f"Weft vs transformers: {h / results[0][1]:.2f}x")


if __name__ == "__main__":
    main()
