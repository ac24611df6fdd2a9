#!/usr/bin/env python3
"""Checkpoint load bandwidth, side by side in one run on the GPU machine.

Saves Llama 3.1 8B in fp16 (random values, DIR/cfg/llama8b/config.json from
make_plans.sh) as one safetensors file, then measures:
  - file read: the checkpoint read by four threads, as the loader copies
    (it was just written, so this is the page cache: the fastest a file can
    be read here),
  - host-to-device: pinned 1 GiB copies (torch),
  - Weft: the "weights" phase of weft-run's load (weft-run prints its load
    phases), in GB/s of weight bytes, and against the slower of the two.
Then the same with --random-weights. With WEFT_RUN_BASELINE=PATH, another
weft-run (an earlier build) loads the same checkpoint for comparison.
Prints a table last.

    python3 test/gpu/bench_load.py DIR
"""
import os
import re
import subprocess
import sys
import tempfile
import time

import torch
import transformers


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def file_read(paths, threads=4):
    """Bytes per second reading `paths` with `threads` readers (pread into
    private buffers; the GIL is released while they wait), as the loader
    reads with that many threads."""
    from concurrent.futures import ThreadPoolExecutor
    total = sum(os.path.getsize(p) for p in paths)
    chunk = 64 << 20

    def read_range(args):
        path, start, end = args
        fd = os.open(path, os.O_RDONLY)
        b = bytearray(chunk)
        try:
            off = start
            while off < end:
                n = os.preadv(fd, [memoryview(b)[:min(chunk, end - off)]], off)
                if n <= 0:
                    break
                off += n
        finally:
            os.close(fd)

    jobs = []
    for p in paths:
        size = os.path.getsize(p)
        part = (size + threads - 1) // threads
        jobs += [(p, i * part, min(size, (i + 1) * part)) for i in range(threads)]
    times = []
    for _ in range(3):
        t0 = time.time()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(read_range, jobs))
        times.append(time.time() - t0)
    return total / median(times)


def h2d():
    x = torch.empty(1 << 30, dtype=torch.uint8).pin_memory()
    y = torch.empty_like(x, device="cuda")
    y.copy_(x, non_blocking=True)
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        t0 = time.time()
        y.copy_(x, non_blocking=True)
        torch.cuda.synchronize()
        times.append(time.time() - t0)
    return x.numel() / median(times)


def weft_load(runner, plan, extra):
    out = subprocess.run([runner, plan, "--prompt-ids", "1", "--max-tokens", "1", "--quiet",
                          *extra], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit("weft-run failed: " + out.stderr)
    phases = dict((k, float(v)) for k, v in
                  re.findall(r"([\w-]+) ([0-9.]+) s", out.stdout.split("load phases:")[1].splitlines()[0]))
    total = float(re.search(r"loaded in ([0-9.]+) s", out.stdout).group(1))
    return phases, total


def main():
    d = sys.argv[1]
    runner, plan = os.path.join(d, "weft-run"), os.path.join(d, "llama8b-fp16.weft")
    cfg = transformers.AutoConfig.from_pretrained(os.path.join(d, "cfg", "llama8b"))
    with tempfile.TemporaryDirectory(prefix="weft-load-") as ckpt:
        torch.manual_seed(0)
        with torch.device("cuda"):
            model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float16)
        t0 = time.time()
        model.save_pretrained(ckpt, max_shard_size="1000GB")
        print(f"saved the checkpoint in {time.time() - t0:.1f} s", flush=True)
        del model
        torch.cuda.empty_cache()
        files = [os.path.join(ckpt, f) for f in os.listdir(ckpt) if f.endswith(".safetensors")]
        nbytes = sum(os.path.getsize(p) for p in files)
        read = file_read(files)
        copy = h2d()
        torch.cuda.empty_cache()
        phases, total = weft_load(runner, plan, ["--weights", ckpt, "--skip-header-checksums"])
        rphases, rtotal = weft_load(runner, plan, ["--random-weights"])
        base = os.environ.get("WEFT_RUN_BASELINE")
        bphases = weft_load(base, plan, ["--weights", ckpt, "--skip-header-checksums"])[0] \
            if base else None
    floor = min(read, copy)
    w = nbytes / phases["weights"]
    print(f"checkpoint {nbytes / 1e9:.2f} GB in {len(files)} file(s)")
    print(f"weft-run load phases (checkpoint): {phases}")
    print(f"weft-run load phases (random): {rphases}")
    print("| load, Llama 3.1 8B fp16 | GB/s | seconds | of the slower of read and H2D |")
    print("|---|---|---|---|")
    print(f"| file read (page cache, 4 threads) | {read / 1e9:.1f} | {nbytes / read:.2f} | |")
    print(f"| host to device (pinned) | {copy / 1e9:.1f} | {nbytes / copy:.2f} | |")
    print(f"| Weft, checkpoint weights | {w / 1e9:.1f} | {phases['weights']:.2f} | {w / floor * 100:.0f}% |")
    if bphases:
        b = nbytes / bphases["weights"]
        print(f"| baseline weft-run, checkpoint weights | {b / 1e9:.1f} | {bphases['weights']:.2f} | "
              f"{b / floor * 100:.0f}% |")
    print(f"| Weft, whole load (checkpoint) | | {total:.2f} | |")
    print(f"| Weft, whole load (random weights) | | {rtotal:.2f} | |")


if __name__ == "__main__":
    main()
