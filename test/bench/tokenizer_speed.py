#!/usr/bin/env python3
"""Encode speed of Weft's tokenizer (weft-tokenize) against Hugging Face
`tokenizers` on the same tokenizer.json and the same text, at 10 kB, 100 kB
and 1 MB, for the byte-level and SentencePiece-style (metaspace) fixtures.
A benchmark, not a test:

    pip install tokenizers==0.23.3
    python3 test/bench/tokenizer_speed.py build/tools/weft-tokenize/weft-tokenize

Both sides encode the whole text as one string (no batching, one thread:
RAYON_NUM_THREADS=1), best of several runs; the ids are compared too.
"""
import os
import random
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
from tokenizers import Tokenizer  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "test", "fixtures", "tokenizers")
WORDS = ("the plan and weights compiler runtime tokens serve users model layer attention "
         "12345 3.14 Café naïve 日本語 текст 🚀 def forward(self, x): return x\n").split(" ")


def text(size, seed=1):
    r = random.Random(seed)
    out = []
    n = 0
    while n < size:
        w = r.choice(WORDS)
        out.append(w)
        n += len(w.encode()) + 1
    return " ".join(out).encode()[:size].decode(errors="ignore")


def weft(tool, tok, path, runs):
    out = subprocess.run([tool, tok, "--file", path, "--no-special", "--count", "--repeat",
                          str(runs + 1)], capture_output=True, text=True, check=True).stdout
    return float(out.split("; ")[1].split(" s per")[0]), int(out.split()[0])


def main():
    tool = sys.argv[1]
    print("| tokenizer | text | Hugging Face | Weft | Weft / HF | same ids |")
    print("|---|---|---|---|---|---|")
    for name in ("byte_level_regex", "byte_level", "metaspace_fallback"):
        path = os.path.join(FIXTURES, name, "tokenizer.json")
        hf = Tokenizer.from_file(path)
        for size, label in ((10_000, "10 kB"), (100_000, "100 kB"), (1_000_000, "1 MB")):
            t = text(size)
            runs = 20 if size <= 100_000 else 3
            best = float("inf")
            for _ in range(runs):
                s = time.perf_counter()
                ids = hf.encode(t, add_special_tokens=False).ids
                best = min(best, time.perf_counter() - s)
            with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
                f.write(t)
            w, count = weft(tool, path, f.name, runs)
            mine = subprocess.run([tool, path, "--file", f.name, "--no-special"],
                                  capture_output=True, text=True, check=True).stdout.strip()
            same = [int(x) for x in mine.split(",")] == ids if mine else ids == []
            os.unlink(f.name)
            print(f"| {name} | {label} | {best * 1e3:.2f} ms | {w * 1e3:.2f} ms | "
                  f"{w / best:.2f} | {'yes' if same else 'NO'} |", flush=True)


if __name__ == "__main__":
    main()
