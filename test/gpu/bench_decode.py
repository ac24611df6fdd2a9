#!/usr/bin/env python3
"""Batch-1 decode benchmark on one GPU, side by side: Weft (weft-run on a
plan, random weights; with and without programmatic dependent launch and
CUDA graphs), Hugging Face transformers (eager PyTorch, random weights) and
the floor. Prints a table of ratios. MODEL is llama-3.1-8b (FP16, the
default), qwen3-8b or gemma-2-9b (BF16, as their checkpoints are); the plan
must be of it.

The floor is the bytes one decode token must read over the measured
device-to-device copy bandwidth: every weight except the embedding table,
of which one row is read, plus the KV cache of the positions attended
(averaged over the decode steps).

    python3 test/gpu/bench_decode.py PLAN WEFT_RUN [MODEL]
"""
import subprocess
import sys
import time

import torch
import transformers

MODELS = {
    "llama-3.1-8b": dict(family="Llama", hidden=4096, ffn=14336, layers=32, heads=32,
                         kv_heads=8, head_dim=128, vocab=128256, dtype=torch.float16,
                         head_norms=False, label="Llama 3.1 8B fp16"),
    "qwen3-8b": dict(family="Qwen3", hidden=4096, ffn=12288, layers=36, heads=32,
                     kv_heads=8, head_dim=128, vocab=151936, dtype=torch.bfloat16,
                     head_norms=True, label="Qwen3 8B bf16"),
    # Tied: the LM head is the embedding table, read whole once per token.
    "gemma-2-9b": dict(family="Gemma2", hidden=3584, ffn=14336, layers=42, heads=16,
                       kv_heads=8, head_dim=256, vocab=256000, dtype=torch.bfloat16,
                       head_norms=False, post_norms=True, tied=True, label="Gemma 2 9B bf16"),
}
PROMPT, NEW_TOKENS = 32, 128


def token_bytes(m):
    """Bytes one decode step reads: weights (one embedding row) and KV cache."""
    h, q, kv = m["hidden"], m["heads"] * m["head_dim"], m["kv_heads"] * m["head_dim"]
    layer = (h * q * 2                               # q, o
             + h * kv * 2                            # k, v
             + h * m["ffn"] * 3                      # gate, up, down
             + h * (4 if m.get("post_norms") else 2)  # norms
             + (m["head_dim"] * 2 if m["head_norms"] else 0))
    # + the LM head (the table itself when tied: then no extra row), final norm
    head = m["vocab"] * h + (0 if m.get("tied") else h)
    weights = (m["layers"] * layer + head + h) * 2
    kv_per_position = m["layers"] * 2 * kv * 2
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


def hf(m, tokens=64):
    cfg = getattr(transformers, m["family"] + "Config")(
        hidden_size=m["hidden"], intermediate_size=m["ffn"], num_hidden_layers=m["layers"],
        num_attention_heads=m["heads"], num_key_value_heads=m["kv_heads"],
        head_dim=m["head_dim"], vocab_size=m["vocab"], max_position_embeddings=32768)
    with torch.device("cuda"):
        model = getattr(transformers, m["family"] + "ForCausalLM")(cfg).to(m["dtype"]).eval()
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
    m = MODELS[sys.argv[3] if len(sys.argv) > 3 else "llama-3.1-8b"]
    bw = copy_bandwidth()
    nbytes = token_bytes(m)
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
    h = hf(m)
    table = ("the tied embedding table once, as the LM head" if m.get("tied") else
             "weights without the embedding table, one row of it")
    print(f"floor: {nbytes / 1e9:.2f} GB per token ({table}, KV cache) over {bw / 1e12:.2f} TB/s")
    print(f"| batch-1 decode, {m['label']} | ms/token | tok/s | achieved GB/s | vs floor |")
    print("|---|---|---|---|---|")
    for name, t in [("floor (copy bandwidth %.2f TB/s)" % (bw / 1e12), floor), *results,
                    ("HF transformers (eager)", h)]:
        print(f"| {name} | {t * 1e3:.2f} | {1 / t:.1f} | {nbytes / t / 1e9:.0f} | {floor / t * 100:.1f}% |")
    print(f"Weft vs transformers: {h / results[0][1]:.2f}x")


if __name__ == "__main__":
    main()
