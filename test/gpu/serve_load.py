#!/usr/bin/env python3
"""The reference workload against a running OpenAI-compatible server, in
its simplest form (until weft-bench exists): N concurrent users, each sends
streaming completions in a closed loop (prompt of token ids, max_tokens,
temperature 0) for R rounds; reports per-request tokens/s (output tokens
over end-to-end time, TTFT included), time to first token, inter-token
latency, total throughput and errors.

    python3 test/gpu/serve_load.py URL MODEL [--users 100] [--rounds 1]
        [--prompt-tokens 32] [--max-tokens 100]
    python3 test/gpu/serve_load.py --write-tokenizer FILE VOCAB

Plans compiled from sparse checkpoints carry no tokenizer, and without one a
server streams no text to time. --write-tokenizer writes a byte-level BPE
tokenizer.json of VOCAB tokens (the 256 bytes, then "w<id>" words, no
merges) for `weft-serve --tokenizer FILE`: every id decodes to text.
"""
import argparse
import asyncio
import json
import random
import time


async def one(session, url, model, prompt, max_tokens, stats):
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    first, last, tokens, gaps, done = None, None, 0, [], False
    try:
        async with session.post(url + "/v1/completions", json=body) as r:
            if r.status != 200:
                stats["errors"].append(f"HTTP {r.status}: {(await r.text())[:200]}")
                return
            buf = b""
            async for chunk in r.content.iter_any():
                buf += chunk
                while b"\n\n" in buf:
                    ev, buf = buf.split(b"\n\n", 1)
                    data = ev.decode()[6:]
                    if data == "[DONE]":
                        done = True
                        continue
                    j = json.loads(data)
                    now = time.perf_counter()
                    if j.get("usage"):
                        tokens = j["usage"]["completion_tokens"]
                    elif j["choices"] and j["choices"][0]["text"]:
                        if first is None:
                            first = now
                        elif last is not None:
                            gaps.append(now - last)
                        last = now
    except Exception as e:  # a failed request is counted, not fatal
        stats["errors"].append(repr(e)[:200])
        return
    end = time.perf_counter()
    if not done or first is None:
        stats["errors"].append("stream ended without [DONE] or text")
        return
    stats["tps"].append(tokens / (end - t0))
    stats["ttft"].append(first - t0)
    stats["itl"].extend(gaps)
    stats["tokens"] += tokens


async def user(session, args, rng, stats):
    for _ in range(args.rounds):
        prompt = [rng.randrange(3, 120000) for _ in range(args.prompt_tokens)]
        await one(session, args.url, args.model, prompt, args.max_tokens, stats)


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))] if v else float("nan")


def write_tokenizer(path, vocab):
    # GPT-2's byte-to-unicode table: printable bytes stand for themselves.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = {b: chr(c) for b, c in zip(bs, cs)}
    tokens = {table[b]: b for b in range(256)}
    for i in range(256, vocab):
        tokens[f"w{i}"] = i
    tok = {"version": "1.0", "added_tokens": [], "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                             "use_regex": True},
           "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                       "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None,
                     "continuing_subword_prefix": None, "end_of_word_suffix": None,
                     "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                     "vocab": tokens, "merges": []}}
    json.dump(tok, open(path, "w"))


async def main():
    import sys
    if len(sys.argv) == 4 and sys.argv[1] == "--write-tokenizer":
        write_tokenizer(sys.argv[2], int(sys.argv[3]))
        return
    import aiohttp  # on the GPU machine; not needed to write a tokenizer
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("model")
    p.add_argument("--users", type=int, default=100)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--prompt-tokens", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=100)
    args = p.parse_args()
    stats = {"tps": [], "ttft": [], "itl": [], "tokens": 0, "errors": []}
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=600)) as s:
        t0 = time.perf_counter()
        await asyncio.gather(*(user(s, args, random.Random(i), stats) for i in range(args.users)))
        wall = time.perf_counter() - t0
    n = len(stats["tps"])
    print(f"| users | requests | errors | tok/s per request (mean / p50 / p10) | TTFT p50 / p99 | "
          f"ITL p50 / p99 | total tok/s |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {args.users} | {n} | {len(stats['errors'])} | "
          f"{sum(stats['tps']) / max(n, 1):.1f} / {pct(stats['tps'], 0.5):.1f} / "
          f"{pct(stats['tps'], 0.1):.1f} | {pct(stats['ttft'], 0.5) * 1e3:.0f} / "
          f"{pct(stats['ttft'], 0.99) * 1e3:.0f} ms | {pct(stats['itl'], 0.5) * 1e3:.1f} / "
          f"{pct(stats['itl'], 0.99) * 1e3:.1f} ms | {stats['tokens'] / wall:,.0f} |")
    for e in stats["errors"][:5]:
        print("   error:", e)


if __name__ == "__main__":
    asyncio.run(main())
