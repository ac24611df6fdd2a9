#!/usr/bin/env python3
"""Checks the sampling kernel (weft/sample.cuh) token by token on the GPU.

For each setting (temperature, top-k, top-p, seed) it runs weft-run over a
file of distinct prompts with --max-tokens 1 and --dump-logits, so it has,
for every sequence, the exact f32 logits row the sampler read and the token
it chose. The draw is the scheduler's uniformAt(seed, 0), reproduced here;
the expected token is the same rule in float64: candidates within 40 /
temperature of the best logit, top-k by (logit desc, index asc), the
shortest prefix reaching top_p of the mass, then the first token whose
cumulative mass exceeds uniform x kept. A token that differs is accepted
only where float32 sums can flip the choice (the draw within 1e-4 of the
kept mass of a boundary). Covers a 256-token vocabulary (fixture qwen2) and
Llama 3.1's 128256 (candidates in shared memory, and a flat row with more
than the 2048 that fit, re-read from global memory).

  test/gpu/check_sampling.py DIR [WEIGHTS_ROOT]     (DIR from make_plans.sh)
Prints one line per setting and a table last; exits 1 on a mismatch.
"""
import os
import random
import subprocess
import sys
import tempfile

import numpy as np

MASK = (1 << 64) - 1


def mix(z):
    z = (z + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def uniform_at(seed, index):
    return float(np.float32((mix(seed ^ mix(index)) >> 40) * 2.0**-24))


def expected(row, temp, top_k, top_p, u):
    """The token the rule picks, and the margin of that choice (how far the
    draw and the top-p target sit from a boundary, as a fraction of kept)."""
    row = row.astype(np.float64)
    best = int(np.lexsort((np.arange(len(row)), -row))[0])
    if not temp > 0:
        return best, 1.0
    z = (row - row[best]) / temp
    cand = np.nonzero(z >= -40.0)[0]
    order = cand[np.lexsort((cand, -row[cand]))]  # logit desc, index asc
    p = np.exp(z[order])
    n = len(order)
    kept_n = top_k if 0 < top_k < n else n
    p = p[:kept_n]
    total = p.sum()
    cum = np.cumsum(p)
    margin = 1.0
    if top_p < 1.0:
        target = top_p * total
        j = int(np.searchsorted(cum, target, side="left"))  # first cum >= target
        j = min(j, kept_n - 1)
        margin = min(margin, abs(cum[j] - target) / total,
                     abs((cum[j - 1] if j else 0.0) - target) / total)
        p = p[: j + 1]
        cum = cum[: j + 1]
    kept = cum[-1]
    target = u * kept
    i = int(np.searchsorted(cum, target, side="right"))  # first cum > target
    i = min(i, len(p) - 1)
    margin = min(margin, abs(cum[i] - target) / kept,
                 abs((cum[i - 1] if i else 0.0) - target) / kept)
    return int(order[i]), margin


def run(weft_run, plan, weights, prompts, vocab, temp, top_k, top_p, seed):
    with tempfile.TemporaryDirectory() as tmp:
        pfile = os.path.join(tmp, "prompts.txt")
        lfile = os.path.join(tmp, "logits.f32")
        with open(pfile, "w") as f:
            f.write("\n".join(",".join(map(str, p)) for p in prompts) + "\n")
        cmd = [weft_run, plan] + weights + [
            "--prompts", pfile, "--max-tokens", "1", "--dump-logits", lfile, "--quiet",
            "--temperature", str(temp)]
        if temp > 0:  # weft-run refuses them at temperature 0, where they do nothing
            cmd += ["--top-k", str(top_k), "--top-p", str(top_p), "--seed", str(seed)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(" ".join(cmd) + "\n" + out.stderr)
        tokens = {}
        for line in out.stdout.splitlines():
            if line.startswith("sequence ") and " tokens:" in line:
                head, ids = line.split(" tokens:")
                tokens[int(head.split()[1])] = [int(t) for t in ids.split()]
        logits = np.fromfile(lfile, dtype=np.float32).reshape(len(prompts), vocab)
        return [tokens[i][0] for i in range(len(prompts))], logits


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else ".gpu"
    root = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "fixtures")
    weft_run = os.path.join(d, "weft-run")
    r = random.Random(11)
    cases = []
    # (label, plan, weights, vocab, prompt count, settings)
    small = [(1.0, 0, 1.0), (0.7, 20, 1.0), (1.3, 0, 0.9), (2.0, 50, 0.8), (0.0, 0, 1.0)]
    big = [(1.0, 0, 1.0), (0.8, 40, 0.95), (50.0, 0, 1.0), (50.0, 0, 0.5)]
    cases.append(("qwen2 fixture, vocab 256", os.path.join(d, "qwen2-mb32.weft"),
                  ["--weights", os.path.join(root, "qwen2")], 256, 24, small))
    cases.append(("llama8b-2l, vocab 128256", os.path.join(d, "llama8b-2l-mb64.weft"),
                  ["--random-weights"], 128256, 48, big))
    rows, bad = [], 0
    for label, plan, weights, vocab, count, settings in cases:
        prompts = [[r.randrange(3, vocab) for _ in range(r.randrange(1, 12))] for _ in range(count)]
        for temp, top_k, top_p in settings:
            for seed in (1, 2, 3):
                got, logits = run(weft_run, plan, weights, prompts, vocab, temp, top_k, top_p, seed)
                u = uniform_at(seed, 0)
                same = near = wrong = 0
                for g, row in zip(got, logits):
                    want, margin = expected(row, temp, top_k, top_p, u)
                    if g == want:
                        same += 1
                    elif margin < 1e-4:
                        near += 1
                    else:
                        wrong += 1
                bad += wrong
                name = f"{label}: T {temp} top-k {top_k} top-p {top_p} seed {seed}"
                print(f"{name}: {same} as expected, {near} at a float32 boundary, {wrong} wrong",
                      flush=True)
                rows.append((label, temp, top_k, top_p, seed, len(got), same, near, wrong))
    print()
    print(f"{'model':26} {'T':>5} {'top-k':>5} {'top-p':>5} {'seed':>4} {'seqs':>4} "
          f"{'same':>4} {'edge':>4} {'wrong':>5}")
    for row in rows:
        print(f"{row[0]:26} {row[1]:5} {row[2]:5} {row[3]:5} {row[4]:4} {row[5]:4} "
              f"{row[6]:4} {row[7]:4} {row[8]:5}")
    print("sampling:", "OK" if bad == 0 else f"{bad} WRONG")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
