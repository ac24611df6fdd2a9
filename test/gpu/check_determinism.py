#!/usr/bin/env python3
"""Checks that greedy decoding gives the same tokens on every run.

Runs each plan RUNS times (fresh weft-run processes, random weights) on the
same prompts and compares the generated ids: one prompt of 40 tokens, and
with --batch N, N distinct prompts decoded together (`--prompts`), so the
batched buckets run too. Greedy decoding reads the argmax of the logits, so
any reduction whose order depends on timing (float atomics) shows up as a
token that differs between runs wherever two logits nearly tie, which
random weights make common.

  test/gpu/check_determinism.py WEFT_RUN PLAN[:N] [PLAN[:N] ...] [--runs 5]
      [--max-tokens 48] [--sample T,K,P,SEED]

Prompt ids go up to 128000: plans of a Llama 3-sized vocabulary.
--sample decodes by sampling instead (temperature T, top-k K, top-p P, seed
SEED; the plan must sample): the same seed must give the same tokens.
Prints a table (plan, prompts, runs, distinct outputs, first position where
two runs differ); exits 1 if any plan gives more than one output.
"""
import argparse
import os
import subprocess
import sys
import tempfile


def prompt(seed, n):
    return [7 + (997 * i + 131 * seed) % 128000 for i in range(n)]


def run_once(args, plan, prompts_file):
    """The ids weft-run generates for each prompt, as a tuple of tuples."""
    cmd = [args.run, plan, "--random-weights", "--quiet", "--prompts", prompts_file,
           "--max-tokens", str(args.max_tokens)]
    if args.sample:
        t, k, p, seed = args.sample
        cmd += ["--temperature", t, "--top-k", k, "--top-p", p, "--seed", seed]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{os.path.basename(plan)}: weft-run failed: {out.stderr.strip()[-300:]}")
    # One "sequence I tokens: ..." line per prompt.
    lines = tuple(tuple(l.split("tokens:", 1)[1].split()) for l in out.stdout.splitlines()
                  if l.startswith("sequence ") and "tokens:" in l)
    if not lines:
        sys.exit(f"{os.path.basename(plan)}: weft-run printed no tokens")
    return lines


def first_difference(a, b):
    for s, (x, y) in enumerate(zip(a, b)):
        for i, (u, v) in enumerate(zip(x, y)):
            if u != v:
                return f"prompt {s}, token {i}"
    return "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("plans", nargs="+", help="PLAN or PLAN:N (N prompts decoded together)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--sample", help="T,K,P,SEED: sample with these settings instead of greedy")
    args = ap.parse_args()
    if args.sample:
        args.sample = args.sample.split(",")
        if len(args.sample) != 4:
            ap.error("--sample takes T,K,P,SEED (four comma-separated values)")
    rows, failed = [], False
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.plans:
            plan, _, n = spec.partition(":")
            n = int(n or 1)
            path = os.path.join(tmp, f"prompts-{n}.txt")
            with open(path, "w") as f:
                for s in range(n):
                    f.write(",".join(map(str, prompt(s, 40 - s % 7))) + "\n")
            outputs = [run_once(args, plan, path) for _ in range(args.runs)]
            distinct = len(set(outputs))
            diff = next((first_difference(outputs[0], o) for o in outputs[1:] if o != outputs[0]),
                        "-")
            ok = distinct == 1
            failed |= not ok
            name = os.path.basename(plan)
            print(f"{name}: {n} prompts, {args.runs} runs, {distinct} distinct outputs",
                  flush=True)
            rows.append((name, n, args.runs, distinct, diff, "ok" if ok else "DIFFERS"))
    print()
    print("| plan | prompts | runs | distinct outputs | first difference | result |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(map(str, r)) + " |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
